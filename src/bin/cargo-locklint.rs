#[global_allocator]
static ALLOCATOR: locklint::allocator::Allocator = locklint::allocator::ALLOCATOR;

fn main() -> std::process::ExitCode {
    locklint::cli::guarded(|| locklint::cli::cargo::main(std::env::args_os().collect()))
}
