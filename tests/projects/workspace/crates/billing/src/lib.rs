pub mod invoices;
pub mod keys;
