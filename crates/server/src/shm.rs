//! The shared-memory transport's server side: one thread that spin-polls every slot of the
//! region for a new request, runs it, and answers in the slot (a stand-in for the 2025
//! paper's kernel bypass, where F-Stack's single network thread spin-polls the NIC; see
//! [`protocol::shm`]). It serves its requests itself, as a unified worker does: no queue.
//!
//! ```text
//!   loop over slots:
//!     claimed, request sequence ahead ─► copy the frame out, check it, ConnState::handle,
//!                                        copy the answer in, publish its sequence
//!     given back by its client         ─► drop the connection's state (aborting its
//!                                        transaction), free the slot
//!   every tick: idle transactions time out; a claimed slot whose process is gone is freed
//!   nothing to do for 10 ms: sleep 50 µs between passes (else spin)
//! ```

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use protocol::shm::{process_alive, Region, CLAIMED, FREE, RELEASED};
use protocol::{ErrorClass, Response};

use crate::control::{Control, WorkerStats};
use crate::handler::{ConnState, Shared};
use crate::trace::{Phase, Tracer};

/// How long the poller spins with nothing to do before it naps between passes.
const SPIN_BEFORE_NAP: Duration = Duration::from_millis(10);
const NAP: Duration = Duration::from_micros(50);

pub(crate) fn poller(shared: &Shared, control: &Control, region: Region) -> WorkerStats {
    let mut stats = WorkerStats::default();
    let mut tracer = Tracer::new(control.config.trace);
    let slots = region.slots();
    let mut states: Vec<Option<ConnState<'_>>> = (0..slots).map(|_| None).collect();
    let mut request = Vec::new();
    let mut response = Vec::new();
    let mut last_work = Instant::now();
    let mut last_sweep = Instant::now();
    while !control.stop.load(Ordering::Acquire) {
        let pass = tracer.start();
        let mut worked = false;
        for (slot, conn) in states.iter_mut().enumerate() {
            match region.state(slot).load(Ordering::Acquire) {
                CLAIMED => {
                    // A request is waiting while its sequence is ahead of the last answer's.
                    let seq = region.request_seq(slot).load(Ordering::Acquire);
                    if seq == region.response_seq(slot).load(Ordering::Relaxed) {
                        continue;
                    }
                    worked = true;
                    stats.requests += 1;
                    let state = conn.get_or_insert_with(|| {
                        stats.connections += 1;
                        ConnState::default()
                    });
                    let len = region.request_len(slot).load(Ordering::Relaxed) as usize;
                    let start = tracer.start();
                    let copied = region.read(slot, false, len, &mut request);
                    tracer.charge(Phase::SocketRead, start);
                    response.clear();
                    let whole = copied
                        && matches!(
                            protocol::frame_len(&request, shared.max_frame),
                            Ok(Some(total)) if total == request.len()
                        );
                    if whole {
                        state.handle(&request[4..], shared, &mut response, &mut tracer);
                    } else {
                        failure(
                            ErrorClass::Protocol,
                            "a malformed frame in shared memory".into(),
                            &mut response,
                        );
                        // The client must greet again.
                        *conn = None;
                    }
                    if response.len() > region.buffer() {
                        let message = format!(
                            "the response is {} bytes, over the shared-memory buffer of {}",
                            response.len(),
                            region.buffer()
                        );
                        response.clear();
                        failure(ErrorClass::Invalid, message, &mut response);
                    }
                    let start = tracer.start();
                    region.write(slot, true, &response);
                    region
                        .response_len(slot)
                        .store(response.len() as u32, Ordering::Relaxed);
                    region.response_seq(slot).store(seq, Ordering::Release);
                    tracer.charge(Phase::NetworkSend, start);
                }
                RELEASED => {
                    // Dropping the state aborts the connection's open transaction.
                    *conn = None;
                    region.state(slot).store(FREE, Ordering::Release);
                }
                _ => {}
            }
        }
        let now = Instant::now();
        if now.duration_since(last_sweep) >= control.tick() {
            last_sweep = now;
            for (slot, conn) in states.iter_mut().enumerate() {
                if let Some(state) = conn {
                    if state.expire(now, control.config.idle_timeout) {
                        stats.timed_out += 1;
                    }
                }
                if region.state(slot).load(Ordering::Acquire) == CLAIMED
                    && !process_alive(region.pid(slot).load(Ordering::Acquire))
                {
                    *conn = None;
                    region.state(slot).store(FREE, Ordering::Release);
                }
            }
        }
        if worked {
            last_work = now;
        } else {
            tracer.charge_idle(pass);
            if now.duration_since(last_work) > SPIN_BEFORE_NAP {
                std::thread::sleep(NAP);
            } else {
                std::hint::spin_loop();
            }
        }
    }
    drop(states);
    tracer.finish_into(&mut stats);
    stats
}

fn failure(class: ErrorClass, message: String, out: &mut Vec<u8>) {
    Response::Failed { class, message }.encode(out);
}
