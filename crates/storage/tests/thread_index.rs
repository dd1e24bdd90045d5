//! Thread numbers are given back when threads end: a process whose threads come and go
//! (`glass scale`'s points, a server's connections) keeps its numbers low, so its threads keep
//! shards of their own. (A test binary of its own: no other test's threads take numbers.)

use std::collections::BTreeSet;

use storage::shard::thread_index;

fn numbers_of(threads: usize) -> BTreeSet<usize> {
    let barrier = std::sync::Barrier::new(threads);
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    let n = thread_index();
                    // All alive at once: each holds its number while the others take theirs.
                    barrier.wait();
                    assert_eq!(thread_index(), n, "a thread keeps its number");
                    n
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

#[test]
fn an_ended_threads_number_is_given_again_and_living_threads_never_share_one() {
    let main = thread_index();
    let first = numbers_of(16);
    assert_eq!(
        first.len(),
        16,
        "sixteen living threads, sixteen numbers: {first:?}"
    );
    assert!(!first.contains(&main));
    for round in 0..20 {
        let again = numbers_of(16);
        assert_eq!(
            again, first,
            "round {round}: the numbers given back are given again"
        );
    }
    // One after another: always the lowest free number.
    let lowest = *first.iter().next().unwrap();
    for _ in 0..50 {
        assert_eq!(numbers_of(1).into_iter().next(), Some(lowest));
    }
    assert_eq!(thread_index(), main);
}
