//! Stepping the core is never re-entrant. The core's outputs must be carried out in the order
//! it emitted them (engine's raft/types.rs); but carrying one out can produce a new input at
//! once (a send to a peer with no connection fails, a closed connection fails its requests). If
//! that input were stepped on the spot, its outputs would be carried out before the rest of the
//! outer list. So such inputs wait in a queue and are stepped, in order, after the current list.

use std::collections::VecDeque;

use engine::replica::{Input, Output};

/// Inputs waiting for the core, and the output buffer reused between steps.
#[derive(Debug, Default)]
pub(crate) struct InputQueue {
    waiting: VecDeque<Input>,
    /// A step's outputs are being carried out: a new input waits.
    busy: bool,
    outputs: Vec<Output>,
}

/// A driver of the core: how to step it and how to carry out one output.
pub(crate) trait CoreDriver {
    fn input_queue(&mut self) -> &mut InputQueue;
    fn step_core(&mut self, input: Input, out: &mut Vec<Output>);
    fn carry_out(&mut self, output: Output);

    /// Steps `input`, then each input that carrying out the outputs produced, in arrival order.
    /// Called while outputs are being carried out, it only queues `input`.
    fn step(&mut self, input: impl Into<Input>) {
        let queue = self.input_queue();
        queue.waiting.push_back(input.into());
        if queue.busy {
            return;
        }
        queue.busy = true;
        while let Some(next) = self.input_queue().waiting.pop_front() {
            let mut out = std::mem::take(&mut self.input_queue().outputs);
            self.step_core(next, &mut out);
            for output in out.drain(..) {
                self.carry_out(output);
            }
            self.input_queue().outputs = out;
        }
        self.input_queue().busy = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stand-in core: each Tick{now: n} emits a ShutdownComplete marker per n; carrying out
    /// the first output of Tick 1 produces Tick 2 at once (as a failed send produces
    /// RequestFailed).
    #[derive(Default)]
    struct Recorder {
        queue: InputQueue,
        in_step: bool,
        carried: Vec<(u64, usize)>,
        current: u64,
    }

    impl CoreDriver for Recorder {
        fn input_queue(&mut self) -> &mut InputQueue {
            &mut self.queue
        }

        fn step_core(&mut self, input: Input, out: &mut Vec<Output>) {
            assert!(
                !self.in_step,
                "the core was stepped while its outputs were carried out"
            );
            let Input::Core(engine::raft::Input::Tick { now }) = input else {
                unreachable!()
            };
            self.current = now;
            for _ in 0..3 {
                out.push(Output::Core(engine::raft::Output::ShutdownComplete));
            }
            self.in_step = true;
        }

        fn carry_out(&mut self, _output: Output) {
            let n = self.carried.iter().filter(|c| c.0 == self.current).count();
            self.carried.push((self.current, n));
            if self.current == 1 && n == 0 {
                self.step(engine::raft::Input::Tick { now: 2 });
            }
            if n == 2 {
                self.in_step = false; // the last output of this step
            }
        }
    }

    #[test]
    fn inputs_produced_while_carrying_out_wait_for_the_rest_of_the_list() {
        let mut r = Recorder::default();
        r.step(engine::raft::Input::Tick { now: 1 });
        assert_eq!(
            r.carried,
            vec![(1, 0), (1, 1), (1, 2), (2, 0), (2, 1), (2, 2)],
            "every output of step 1 before any of step 2"
        );
        assert!(r.queue.waiting.is_empty() && !r.queue.busy);
    }
}
