//! A system call that neither waits, wakes nor starts anything: a `write` to or a `read` from
//! the page cache (a temporary file's block), an `open` or an `unlink`. The calling thread is
//! charged the profile's `os.syscall_ns` and keeps its CPU; no shared memory is touched, so
//! there is no sync point, as for private work.
//!
//! Not modelled: what the call does inside the kernel beyond entering and leaving it (copying
//! a block to or from the page cache, the file system's own locks).

use super::{with, Engine};

/// Charges the calling virtual thread one system call that does not block.
#[cold]
#[inline(never)]
pub fn system_call() {
    with(Engine::system_call);
}

impl Engine {
    fn system_call(&mut self) {
        self.ops += 1;
        let sys = self.os.syscall;
        self.me().clock += sys;
    }
}

#[cfg(test)]
mod tests {
    use super::super::os::KernelCosts;
    use super::super::run;
    use super::super::testing::{clock, on, opteron};
    use super::*;
    use crate::picos::Picos;
    use std::cell::Cell;
    use std::time::Duration;

    #[test]
    #[cfg_attr(
        not(pglocks_sim),
        ignore = "needs the simulator's build (--cfg pglocks_sim)"
    )]
    fn a_system_call_costs_the_profiles_entry_and_exit() {
        let profile = opteron(3000.0);
        let sys = KernelCosts::new(&profile.os).syscall;
        let took = Cell::new(Picos::ZERO);
        let t = on(0, || {
            let start = clock();
            for _ in 0..3 {
                system_call();
            }
            took.set(clock() - start);
        });
        let out = run(&profile, vec![t], Duration::from_millis(1)).unwrap();
        assert!(sys > Picos::ZERO);
        assert_eq!(took.get(), Picos(sys.0 * 3));
        assert_eq!(out.ops, 3);
    }
}
