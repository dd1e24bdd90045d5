//! Populates a kernel, generates the paper's mix, and runs it through `Kernel::run_mix`:
//! the program to measure instructions per transaction with callgrind.
//!
//! ```text
//! cargo build --release -p kernel --example mix
//! valgrind --tool=callgrind --collect-atstart=no --toggle-collect='*Kernel*run_mix*' \
//!     target/release/examples/mix 10000 1
//! ```
//! Arguments: transactions (default 10,000), warehouses (default 1). Sizes are the
//! specification's (100,000 items, 3,000 customers per district).

use kernel::{generate_inputs, Kernel, KernelInput, Scale};

fn main() {
    let mut args = std::env::args().skip(1);
    let count: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(10_000);
    let warehouses: u32 = args.next().and_then(|a| a.parse().ok()).unwrap_or(1);
    let mut kernel = match Kernel::populate(Scale::spec(warehouses), 1) {
        Ok(k) => k,
        Err(e) => {
            eprintln!("populate: {e}");
            std::process::exit(1);
        }
    };
    let inputs = generate_inputs(2, count, warehouses);
    kernel.reserve_for(&inputs);
    let new_orders = inputs
        .iter()
        .filter(|i| matches!(i, KernelInput::NewOrder(_)))
        .count();
    println!(
        "inputs: {new_orders} New-Order, {} Payment",
        count - new_orders
    );
    let start = std::time::Instant::now();
    let committed = kernel.run_mix(&inputs);
    let elapsed = start.elapsed();
    println!(
        "committed {committed} of {count} in {:.3} ms ({:.0} ns per transaction)",
        elapsed.as_secs_f64() * 1e3,
        elapsed.as_nanos() as f64 / count.max(1) as f64
    );
    if committed != count as u64 {
        std::process::exit(1);
    }
}
