//! Where the server's time goes: the 2025 paper's eight server-side phases (its Table 3),
//! timed by trace points in the server's own threads (`ServerConfig::trace`).
//!
//! | # | phase | Glass measures |
//! |---|---|---|
//! | 1 | network receive | not separately: the kernel's receive path runs in softirq context, mostly on the *sender's* core over loopback; what lands on the server's threads is in their system time (see below) |
//! | 2 | socket read | wall time in `read` calls on the sockets (non-blocking: never asleep) |
//! | 3 | request queuing | `dedicated`: handing a request to a worker's queue (and waking it) and taking it off, in thread CPU time; `unified`: none |
//! | 4 | procedure execution | a request's handling less its engine calls: the procedure's own code, or dispatching a batch's operations (thread CPU time) |
//! | 5 | isolation overhead | `--isolation rust`: zero, procedures run in the server's threads; a guest process: a call's wall time less its engine calls and the guest's own time in the procedure (which the guest reports), see `isolation` |
//! | 6 | query execution | engine calls: every `Tx` operation, begin, commit and abort, in CPU time: a lock wait or a commit's wait for its log force is not counted |
//! | 7 | response queuing | `dedicated`: handing a response back (and waking the network thread) and taking it off, in thread CPU time; `unified`: none |
//! | 8 | network send | wall time in `write` calls on the sockets; over loopback this includes the receiving side's kernel path, which runs in the sender's call |
//!
//! Beside them, `decode` and `encode` (the protocol's codec), and each thread's user and
//! system CPU time from `getrusage(RUSAGE_THREAD)` over its life. From those the paper's
//! Figure 3 split follows: transaction processing (4 + 6), Glass's own networking layer (the
//! rest of the user time: event loop, framing, codec, queues, dispatch), and the kernel (the
//! system time: socket calls, `epoll_wait`, wake-ups, and whatever receive processing ran on
//! the server's threads).
//!
//! A trace point reads the monotonic clock (`Instant`, a vDSO call of some 20 ns) twice; a
//! request passes about eight, so tracing adds well under a microsecond to a request that
//! costs the server tens. The queue hand-offs read the thread's CPU clock instead (a system
//! call), because they wake other threads, which may run at once on the same core. With
//! tracing off, each trace point is one branch.

use std::time::Instant;

/// A phase a trace point charges.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    SocketRead = 0,
    Decode,
    RequestQueuing,
    ProcedureExecution,
    QueryExecution,
    Encode,
    ResponseQueuing,
    NetworkSend,
    Isolation,
}

impl Phase {
    pub const ALL: [Phase; 9] = [
        Phase::SocketRead,
        Phase::Decode,
        Phase::RequestQueuing,
        Phase::ProcedureExecution,
        Phase::QueryExecution,
        Phase::Encode,
        Phase::ResponseQueuing,
        Phase::NetworkSend,
        Phase::Isolation,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Phase::SocketRead => "socket read",
            Phase::Decode => "decode (protocol)",
            Phase::RequestQueuing => "request queuing",
            Phase::ProcedureExecution => "procedure execution",
            Phase::QueryExecution => "query execution",
            Phase::Encode => "encode (protocol)",
            Phase::ResponseQueuing => "response queuing",
            Phase::NetworkSend => "network send",
            Phase::Isolation => "isolation overhead",
        }
    }
}

/// What the trace points of one or more threads added up to.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Phases {
    /// Nanoseconds per [`Phase`], in its order.
    pub ns: [u64; 9],
    /// Threads' user and system CPU time over their lives, nanoseconds.
    pub user_ns: u64,
    pub system_ns: u64,
    /// Transactions committed or rolled back by request (a call, a commit, an autocommit
    /// batch), the denominator of "per transaction".
    pub transactions: u64,
    /// Time a spin-polling thread (the shared-memory transport) spent in passes that found
    /// nothing: CPU the thread burns while waiting, not work of any request.
    pub idle_poll_ns: u64,
}

impl Phases {
    pub fn get(&self, phase: Phase) -> u64 {
        self.ns[phase as usize]
    }
}

impl std::ops::AddAssign for Phases {
    fn add_assign(&mut self, o: Phases) {
        for (a, b) in self.ns.iter_mut().zip(o.ns) {
            *a += b;
        }
        self.user_ns += o.user_ns;
        self.system_ns += o.system_ns;
        self.transactions += o.transactions;
        self.idle_poll_ns += o.idle_poll_ns;
    }
}

/// One thread's trace points.
pub struct Tracer {
    on: bool,
    pub phases: Phases,
    started: Option<(u64, u64)>,
    /// Autocommit batches outside a transaction that wrote and committed: counted whether
    /// tracing or not ([`crate::WorkerStats::lone_writes`]).
    lone_writes: u64,
}

impl Tracer {
    /// A tracer for the calling thread; its CPU time counts from now.
    pub fn new(on: bool) -> Tracer {
        Tracer {
            on,
            phases: Phases::default(),
            started: on.then(thread_cpu_ns),
            lone_writes: 0,
        }
    }

    /// Whether trace points record.
    pub fn on(&self) -> bool {
        self.on
    }

    /// The time now, if tracing (the start of a span).
    #[inline]
    pub fn start(&self) -> Option<Instant> {
        self.on.then(Instant::now)
    }

    /// The thread's CPU clock now, if tracing: the start of a span that may wake another
    /// thread. Waking a thread that shares the core can switch to it at once, and a wall-clock
    /// span would then charge the woken thread's work to this one.
    #[inline]
    pub fn start_cpu(&self) -> Option<u64> {
        self.on.then(thread_clock_ns)
    }

    /// Charges the thread CPU time since `start` (from [`Tracer::start_cpu`]) to `phase`.
    #[inline]
    pub fn charge_cpu(&mut self, phase: Phase, start: Option<u64>) {
        if let Some(t) = start {
            self.phases.ns[phase as usize] += thread_clock_ns().saturating_sub(t);
        }
    }

    /// Runs `f`, charging the thread CPU time it took to `phase` (for spans that may wait:
    /// a commit waiting for its log force is not the server's work).
    #[inline]
    pub fn time_cpu<R>(&mut self, phase: Phase, f: impl FnOnce() -> R) -> R {
        let start = self.start_cpu();
        let r = f();
        self.charge_cpu(phase, start);
        r
    }

    /// The start of a request's handling, on both clocks (see [`Tracer::charge_handling`]).
    #[inline]
    pub fn start_handling(&self) -> Option<(Instant, u64)> {
        self.on.then(|| (Instant::now(), thread_clock_ns()))
    }

    /// Charges a request's handling since `start`: `engine_wall_ns` of it was spent in engine
    /// calls (wall time). Time off the CPU during the handling (a lock wait, or the thread
    /// preempted) is taken to have been inside the engine calls and is charged to nothing;
    /// the engine's CPU time is query execution, the rest procedure execution.
    pub fn charge_handling(&mut self, start: Option<(Instant, u64)>, engine_wall_ns: u64) {
        if let Some((wall0, cpu0)) = start {
            let wall = wall0.elapsed().as_nanos() as u64;
            let cpu = thread_clock_ns().saturating_sub(cpu0);
            let off_cpu = wall.saturating_sub(cpu);
            let query = engine_wall_ns.saturating_sub(off_cpu).min(cpu);
            self.phases.ns[Phase::QueryExecution as usize] += query;
            self.phases.ns[Phase::ProcedureExecution as usize] += cpu - query;
        }
    }

    /// Charges a procedure call run in a guest process, from `start` until now: the engine's
    /// `engine_ns` to query execution, the guest's own `guest_ns` in the procedure to
    /// procedure execution, and the rest (both sides' serialization, the channel, the waits
    /// for the other side to run) to isolation overhead. All wall time: the guest's work is
    /// on another process's clock.
    pub fn charge_isolated(&mut self, start: Option<Instant>, engine_ns: u64, guest_ns: u64) {
        if let Some(t) = start {
            let wall = t.elapsed().as_nanos() as u64;
            let guest_ns = guest_ns.min(wall.saturating_sub(engine_ns));
            self.phases.ns[Phase::QueryExecution as usize] += engine_ns;
            self.phases.ns[Phase::ProcedureExecution as usize] += guest_ns;
            self.phases.ns[Phase::Isolation as usize] +=
                wall.saturating_sub(engine_ns).saturating_sub(guest_ns);
        }
    }

    /// Charges the time since `start` to `phase`.
    #[inline]
    pub fn charge(&mut self, phase: Phase, start: Option<Instant>) {
        if let Some(t) = start {
            self.phases.ns[phase as usize] += t.elapsed().as_nanos() as u64;
        }
    }

    /// Runs `f`, charging its time to `phase`.
    #[inline]
    pub fn time<R>(&mut self, phase: Phase, f: impl FnOnce() -> R) -> R {
        let start = self.start();
        let r = f();
        self.charge(phase, start);
        r
    }

    /// Charges the time since `start` to idle polling (a pass that found no request).
    #[inline]
    pub fn charge_idle(&mut self, start: Option<Instant>) {
        if let Some(t) = start {
            self.phases.idle_poll_ns += t.elapsed().as_nanos() as u64;
        }
    }

    /// Counts a transaction that ended by a request (if tracing).
    pub fn transaction(&mut self) {
        if self.on {
            self.phases.transactions += 1;
        }
    }

    /// Counts an autocommit batch outside a transaction that wrote and committed: a
    /// transaction of one batch, which is how the autocommit mode runs every step.
    pub fn lone_write(&mut self) {
        self.lone_writes += 1;
    }

    /// Hands the thread's totals to its statistics: the phases (with [`Tracer::finish`]) and
    /// the lone writes.
    pub(crate) fn finish_into(self, stats: &mut crate::control::WorkerStats) {
        stats.lone_writes += self.lone_writes;
        stats.phases = self.finish();
    }

    /// The thread's totals, its CPU time up to now included.
    pub fn finish(mut self) -> Phases {
        if let Some((user0, sys0)) = self.started {
            let (user1, sys1) = thread_cpu_ns();
            self.phases.user_ns += user1.saturating_sub(user0);
            self.phases.system_ns += sys1.saturating_sub(sys0);
        }
        self.phases
    }
}

/// The calling thread's CPU clock (`CLOCK_THREAD_CPUTIME_ID`), nanoseconds.
fn thread_clock_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec it is given.
    if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) } != 0 {
        return 0;
    }
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The calling thread's user and system CPU time, nanoseconds.
fn thread_cpu_ns() -> (u64, u64) {
    // SAFETY: getrusage writes the struct it is given; RUSAGE_THREAD is the calling thread.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut usage) };
    if rc != 0 {
        return (0, 0);
    }
    let ns = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1_000;
    (ns(usage.ru_utime), ns(usage.ru_stime))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tracer_that_is_off_records_nothing() {
        let mut t = Tracer::new(false);
        t.time(Phase::Decode, || {
            std::thread::sleep(std::time::Duration::from_millis(2))
        });
        t.transaction();
        let p = t.finish();
        assert_eq!(p.ns, [0; 9]);
        assert_eq!((p.user_ns, p.system_ns), (0, 0));
    }

    #[test]
    fn spans_land_in_their_phase_and_cpu_time_is_counted() {
        let mut t = Tracer::new(true);
        t.time(Phase::NetworkSend, || {
            std::thread::sleep(std::time::Duration::from_millis(3))
        });
        // Busy for 15 ms of CPU, so the thread's CPU time grows.
        let start = thread_clock_ns();
        let mut x = 0u64;
        while thread_clock_ns() - start < 15_000_000 {
            x = x.wrapping_add(std::hint::black_box(1));
        }
        // A handling span that sleeps 5 ms inside an "engine call", then burns 1 ms of CPU in
        // it: the sleep is charged to nothing, the engine's CPU to query execution. The call's
        // wall time is measured, and the burn counted on the thread's CPU clock, so that a
        // loaded machine (a longer sleep, a preemption) changes nothing asserted.
        let span = t.start_handling();
        let engine = Instant::now();
        std::thread::sleep(std::time::Duration::from_millis(5));
        let cpu0 = thread_clock_ns();
        while thread_clock_ns() - cpu0 < 1_000_000 {
            x = x.wrapping_add(std::hint::black_box(1));
        }
        t.charge_handling(span, engine.elapsed().as_nanos() as u64);
        let p = t.finish();
        assert!(p.get(Phase::NetworkSend) >= 2_000_000, "{p:?}");
        let query = p.get(Phase::QueryExecution);
        assert!(query >= 500_000, "{p:?}");
        assert!(query < 1_000_000_000, "{p:?}");
        assert_eq!(p.get(Phase::Decode), 0);
        assert!(p.user_ns + p.system_ns >= 10_000_000, "{p:?} {x}");
    }
}
