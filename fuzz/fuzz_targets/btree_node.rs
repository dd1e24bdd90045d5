//! A B+-tree node, read below the page checksum as a tree reads it: the header check, every
//! key and value (children of an inner node), the searches a lookup runs under each key order
//! (the interpolating ones included), the space check a split weighs, then the edits a write
//! makes (insert, remove, set a value, cut short) on a copy. Input: the page image (8 KiB,
//! 32 KiB for longer inputs).
//!
//! Where the node is well formed (its space checks out and its keys ascend under an order),
//! every search must also agree with counting: that is how a search that ends early or an
//! interpolation that skips keys shows.
#![no_main]

use libfuzzer_sys::fuzz_target;
use storage::btree::node::{self, Node};
use storage::btree::{BytewiseKeyOrder, IntKeyOrder, KeyOrder, KeyPart, SchemaKeyOrder};

/// Runs the searches of `order` for `probes`; where `keys` ascend strictly under it, checks
/// each result against counting.
fn search_all<K: KeyOrder>(node: &Node<'_>, order: &K, probes: &[Vec<u8>], keys: Option<&[&[u8]]>) {
    let sorted = keys.filter(|keys| {
        keys.windows(2)
            .all(|w| order.compare(w[0], w[1]) == std::cmp::Ordering::Less)
            && (!K::FIXED_U64 || keys.iter().all(|k| k.len() >= 8))
    });
    for probe in probes {
        for strict in [true, false] {
            let Ok(rank) = node.search(order, probe, strict) else {
                continue;
            };
            assert!(rank.index <= node.len());
            if let Some(keys) = sorted {
                if K::FIXED_U64 && probe.len() < 8 {
                    continue;
                }
                let below = keys
                    .iter()
                    .filter(|k| match order.compare(k, probe) {
                        std::cmp::Ordering::Less => true,
                        std::cmp::Ordering::Equal => !strict,
                        std::cmp::Ordering::Greater => false,
                    })
                    .count();
                assert_eq!(rank.index, below, "strict {strict}, probe {probe:?}");
                let holds = keys.iter().any(|k| order.compare(k, probe).is_eq());
                assert_eq!(rank.found, holds, "strict {strict}, probe {probe:?}");
            }
        }
        let _ = node.find(order, probe);
    }
    if !node.is_leaf() {
        for i in 0..=node.len() {
            let guide = node.guide_for_child(order, i);
            for probe in probes.iter().take(2) {
                let _ = node.search_guided(order, probe, true, guide);
            }
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let page = glass_fuzz::page_image(data, glass_fuzz::page_size_for(data.len()));
    let Ok(node) = Node::new(&page) else {
        return;
    };
    let n = node.len();
    let _ = (
        node.level(),
        node.prev(),
        node.next(),
        node.leftmost(),
        node.page_id(),
    );
    let _ = node.free_space();
    let keys: Result<Vec<&[u8]>, _> = (0..n).map(|i| node.key(i)).collect();
    for i in 0..n {
        let _ = node.value(i);
    }
    if !node.is_leaf() {
        for i in 0..=n {
            let _ = node.child(i);
        }
    }
    let _ = node.entries();
    let space_ok = node.check_space().is_ok();
    let _ = node.spaces_with(n / 2, 12);

    // Probes: the node's own first, middle and last keys, each nudged, and a few fixed ones.
    let mut probes: Vec<Vec<u8>> = vec![
        vec![],
        vec![0; 8],
        vec![0xFF; 9],
        42u64.to_be_bytes().to_vec(),
    ];
    if let Ok(keys) = &keys {
        for i in [0, n / 2, n.saturating_sub(1)] {
            if let Some(k) = keys.get(i) {
                probes.push(k.to_vec());
                let mut above = k.to_vec();
                above.push(0);
                probes.push(above);
                probes.push(k[..k.len() / 2].to_vec());
            }
        }
    }
    let keys = keys.ok().filter(|_| space_ok);
    search_all(&node, &IntKeyOrder, &probes, keys.as_deref());
    search_all(&node, &BytewiseKeyOrder, &probes, keys.as_deref());
    let schema = SchemaKeyOrder::new(vec![KeyPart::Int, KeyPart::Str]);
    search_all(&node, &schema, &probes, None);

    // Edits on a copy, as a write after the node was read would make them.
    let mut copy = page.clone();
    if let Ok(rank) = node.search(&BytewiseKeyOrder, &probes[probes.len() - 1], true) {
        let _ = node::insert_at(&mut copy, rank.index, &probes[probes.len() - 1], 7);
    }
    if let Ok(edited) = Node::new(&copy) {
        if !edited.is_empty() {
            let _ = node::set_value(&mut copy, 0, 9);
        }
    }
    // set_value may have written over the header of a corrupt node: read it again.
    if let Ok(edited) = Node::new(&copy) {
        if !edited.is_empty() {
            let _ = node::remove_at(&mut copy, 0);
        }
    }
    if Node::new(&copy).is_ok() {
        let keep = data.len() % (n + 1);
        let _ = node::truncate(&mut copy, keep);
        if let Ok(cut) = Node::new(&copy) {
            let _ = cut.check_space();
        }
    }
});
