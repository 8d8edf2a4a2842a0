//! locklint: finds distributed-lock misuse.
