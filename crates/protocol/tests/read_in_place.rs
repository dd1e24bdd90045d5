//! A read that borrows its row (`Tx::read_with`, `Tx::read_columns_with`) across the boundary
//! is handed the hinted read's answer where it is kept: it copies nothing, so allocates nothing
//! (counted by the test binary's own global allocator).

mod common;

use common::counted;
use engine::{TableRef, TxError, Value};
use protocol::deferred::Deferred;
use protocol::guest::{run_invocation, Exchange, GuestMsg, HostMsg};
use protocol::{Op, OpResult};

/// Answers every get with its key and a string of 40 bytes.
struct Host;

impl Exchange for Host {
    fn exchange(&mut self, message: &GuestMsg) -> Result<Option<HostMsg>, String> {
        let GuestMsg::Ops { ops } = message else {
            return Err(format!("unexpected {message:?}"));
        };
        let results = ops
            .iter()
            .map(|op| match op {
                Op::Get { key, .. } => {
                    let mut row = key.clone();
                    row.push(Value::Str("x".repeat(40)));
                    OpResult::Row(Some(row))
                }
                other => panic!("unexpected {other:?}"),
            })
            .collect();
        Ok(Some(HostMsg::Results { results }))
    }
}

#[test]
fn a_hinted_answer_is_read_where_it_is_kept() {
    let t = TableRef {
        name: "t".into(),
        id: 3,
    };
    let ended = run_invocation(
        &mut Host,
        &mut Deferred::default(),
        0,
        &[],
        false,
        |tx, _, _, out| {
            tx.prefetch(&[(&t, &[1])]);
            let key = [Value::Int(1)];
            let mut length = 0;
            // The first read crosses, with the hint; the rest are answered by what it brought.
            tx.read_with(&t, &key, false, &mut |r| {
                length = r.str(1)?.len();
                Ok(())
            })?;
            let (read, allocations, _) = counted(|| -> Result<(), TxError> {
                for _ in 0..10 {
                    tx.read_with(&t, &key, false, &mut |r| {
                        assert_eq!(r.str(1)?.len(), length);
                        Ok(())
                    })?;
                    tx.read_columns_with(&t, &key, &[1], false, &mut |r| {
                        assert_eq!(r.int(0)?, 1);
                        Ok(())
                    })?;
                }
                Ok(())
            });
            read?;
            assert_eq!(allocations, 0, "reading a hinted answer copied it");
            out.push(Value::Int(length as i64));
            Ok(())
        },
    );
    assert!(
        matches!(&ended, Some(GuestMsg::Returned { values, .. }) if values == &[Value::Int(40)]),
        "{ended:?}"
    );
}
