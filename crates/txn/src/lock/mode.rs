//! Lock modes of multi-granularity locking (Gray et al., 1976) and their two tables.
//!
//! A transaction locks a record in `S` (read) or `X` (write); before that it takes the
//! *intention* mode (`IS` / `IX`) on every ancestor — database, then table — so that a
//! coarse request (a table `S` for a scan) meets the fine ones in a single lock head.
//! `SIX` = `S` on the whole object plus the right to take `X` below it.
//!
//! Compatibility (`y`: may be granted together to two different transactions):
//!
//! ```text
//!  held \ req  IS  IX  S   SIX X
//!  IS          y   y   y   y   .
//!  IX          y   y   .   .   .
//!  S           y   .   y   .   .
//!  SIX         y   .   .   .   .
//!  X           .   .   .   .   .
//! ```
//!
//! The modes form a lattice, `IS < IX, S < SIX < X`; [`LockMode::supremum`] is its join and is
//! what an upgrade converts to (`S` held + `IX` asked = `SIX`):
//!
//! ```text
//!         X
//!         |
//!        SIX
//!       /   \
//!      IX    S
//!       \   /
//!        IS
//! ```
//!
//! Invariants (tested exhaustively): the matrix is symmetric; `supremum` is commutative,
//! associative and idempotent; and compatibility is monotone in the lattice, so being
//! compatible with every mode of a granted group is the same as being compatible with their
//! supremum (`compatible(r, sup(a, b)) == compatible(r, a) && compatible(r, b)`).

use std::fmt;

/// A lock mode. The names are the textbook ones (Gray & Reuter, *Transaction Processing*).
#[allow(clippy::upper_case_acronyms)] // IS, IX, SIX are the established names of these modes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum LockMode {
    /// Intention shared: the holder will lock descendants in `S`.
    IS = 0,
    /// Intention exclusive: the holder will lock descendants in `X` (or `S`).
    IX = 1,
    /// Shared: read the object and everything below it.
    S = 2,
    /// Shared + intention exclusive.
    SIX = 3,
    /// Exclusive: read and write the object and everything below it.
    X = 4,
}

/// Every mode, in lattice-compatible order (a mode never precedes one it covers).
pub const ALL_MODES: [LockMode; 5] = [
    LockMode::IS,
    LockMode::IX,
    LockMode::S,
    LockMode::SIX,
    LockMode::X,
];

const Y: bool = true;
const N: bool = false;

/// `COMPATIBLE[held][requested]`, indexed by the `repr(u8)` discriminants.
const COMPATIBLE: [[bool; 5]; 5] = [
    //  IS IX S  SIX X
    [Y, Y, Y, Y, N], // IS
    [Y, Y, N, N, N], // IX
    [Y, N, Y, N, N], // S
    [Y, N, N, N, N], // SIX
    [N, N, N, N, N], // X
];

use LockMode::{IS, IX, S, SIX, X};

/// `SUPREMUM[a][b]`: the weakest mode at least as strong as both.
const SUPREMUM: [[LockMode; 5]; 5] = [
    //  IS   IX   S    SIX  X
    [IS, IX, S, SIX, X],     // IS
    [IX, IX, SIX, SIX, X],   // IX
    [S, SIX, S, SIX, X],     // S
    [SIX, SIX, SIX, SIX, X], // SIX
    [X, X, X, X, X],         // X
];

impl LockMode {
    /// Whether two different transactions may hold `self` and `other` on one object at once.
    #[inline]
    pub const fn compatible(self, other: LockMode) -> bool {
        COMPATIBLE[self as usize][other as usize]
    }

    /// The least mode that grants everything `self` and `other` grant (the upgrade target).
    #[inline]
    pub const fn supremum(self, other: LockMode) -> LockMode {
        SUPREMUM[self as usize][other as usize]
    }

    /// Whether holding `self` already grants everything `other` would.
    #[inline]
    pub const fn covers(self, other: LockMode) -> bool {
        self.supremum(other) as u8 == self as u8
    }

    /// The intention mode an ancestor must hold before `self` is taken below it:
    /// `IS` for the read modes, `IX` for any mode that may write.
    #[inline]
    pub const fn intention(self) -> LockMode {
        match self {
            IS | S => IS,
            IX | SIX | X => IX,
        }
    }

    /// The mode this grants implicitly on every descendant: `S` and `SIX` grant `S` below,
    /// `X` grants `X`; the intention modes grant nothing (descendants need their own locks).
    #[inline]
    pub const fn implied_below(self) -> Option<LockMode> {
        match self {
            IS | IX => None,
            S | SIX => Some(S),
            X => Some(X),
        }
    }

    /// Whether a lock in `self` on an ancestor makes a lock in `below` on a descendant
    /// unnecessary.
    #[inline]
    pub const fn covers_below(self, below: LockMode) -> bool {
        match self.implied_below() {
            Some(implied) => implied.covers(below),
            None => false,
        }
    }

    /// The textbook name.
    pub const fn name(self) -> &'static str {
        match self {
            IS => "IS",
            IX => "IX",
            S => "S",
            SIX => "SIX",
            X => "X",
        }
    }
}

impl fmt::Display for LockMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The matrix written out as the textbook prints it, row by row, as strings: a second,
    /// independent spelling of the table so a typo in either is caught.
    #[test]
    fn compatibility_matrix_matches_the_textbook() {
        let expected = ["yyyy.", "yy...", "y.y..", "y....", "....."];
        for (row, held) in ALL_MODES.iter().enumerate() {
            let got: String = ALL_MODES
                .iter()
                .map(|req| if held.compatible(*req) { 'y' } else { '.' })
                .collect();
            assert_eq!(got, expected[row], "row {held}");
        }
    }

    #[test]
    fn compatibility_is_symmetric() {
        for a in ALL_MODES {
            for b in ALL_MODES {
                assert_eq!(a.compatible(b), b.compatible(a), "{a} vs {b}");
            }
        }
    }

    #[test]
    fn supremum_table_is_the_lattice_join() {
        // The partial order, from its Hasse diagram: IS < IX, IS < S, IX < SIX, S < SIX, SIX < X.
        let le = |a: LockMode, b: LockMode| -> bool {
            a == b
                || matches!(
                    (a, b),
                    (IS, _) | (IX, SIX) | (IX, X) | (S, SIX) | (S, X) | (SIX, X)
                )
        };
        for a in ALL_MODES {
            for b in ALL_MODES {
                let j = a.supremum(b);
                assert!(
                    le(a, j) && le(b, j),
                    "{a} v {b} = {j} is not an upper bound"
                );
                for u in ALL_MODES {
                    if le(a, u) && le(b, u) {
                        assert!(le(j, u), "{a} v {b} = {j} is not least (below {u})");
                    }
                }
                assert_eq!(j, b.supremum(a));
                assert_eq!(a.covers(b), le(b, a), "covers({a}, {b})");
            }
        }
    }

    #[test]
    fn supremum_examples() {
        assert_eq!(S.supremum(IX), SIX);
        assert_eq!(IS.supremum(IX), IX);
        assert_eq!(S.supremum(X), X);
        assert_eq!(IS.supremum(S), S);
        assert_eq!(SIX.supremum(IS), SIX);
    }

    #[test]
    fn supremum_is_associative_and_idempotent() {
        for a in ALL_MODES {
            assert_eq!(a.supremum(a), a);
            for b in ALL_MODES {
                for c in ALL_MODES {
                    assert_eq!(a.supremum(b).supremum(c), a.supremum(b.supremum(c)));
                }
            }
        }
    }

    /// The property the lock table relies on to check a request against a granted group.
    #[test]
    fn compatibility_with_a_group_equals_compatibility_with_its_supremum() {
        for a in ALL_MODES {
            for b in ALL_MODES {
                for r in ALL_MODES {
                    assert_eq!(
                        r.compatible(a.supremum(b)),
                        r.compatible(a) && r.compatible(b),
                        "{r} against {{{a}, {b}}}"
                    );
                }
            }
        }
    }

    #[test]
    fn covering_descendants() {
        assert!(S.covers_below(S) && SIX.covers_below(S) && X.covers_below(X));
        assert!(!SIX.covers_below(X) && !S.covers_below(X));
        assert!(
            !IX.covers_below(IX),
            "an intention lock covers nothing below"
        );
        assert!(!IS.covers_below(IS));
    }

    #[test]
    fn intention_modes() {
        assert_eq!(S.intention(), IS);
        assert_eq!(IS.intention(), IS);
        assert_eq!(X.intention(), IX);
        assert_eq!(SIX.intention(), IX);
        assert_eq!(IX.intention(), IX);
        // An intention mode is never stronger than the mode it announces.
        for m in ALL_MODES {
            assert!(m.covers(m.intention()), "{m} covers its intention");
        }
    }
}
