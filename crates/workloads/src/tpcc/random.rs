//! TPC-C's random functions (clauses 2.1.4–2.1.6, 4.3.2).
//!
//! * `NURand(A, x, y) = (((random(0, A) | random(x, y)) + C) % (y − x + 1)) + x`, with
//!   A = 255 for C_LAST, 1023 for C_ID, 8191 for OL_I_ID (clause 2.1.6).
//! * The constant C is chosen once: C-Load while populating, C-Run while running. For C_LAST
//!   the two must differ by a delta in [65, 119], excluding 96 and 112 (clause 2.1.6.1); for
//!   C_ID and OL_I_ID any C-Run in range is allowed.
//! * Last names are three syllables of the table below indexed by the digits of a number in
//!   [0, 999] (clause 4.3.2.3): 371 → "PRICALLYOUGHT".
//! * a-strings are random alphanumeric characters, n-strings random digits (clause 4.3.2.2);
//!   zip codes are four random digits followed by "11111" (clause 4.3.2.7).

use rand::Rng;

/// The ten last-name syllables, indexed by digit.
pub const SYLLABLES: [&str; 10] = [
    "BAR", "OUGHT", "ABLE", "PRI", "PRES", "ESE", "ANTI", "CALLY", "ATION", "EING",
];

/// A for C_LAST, C_ID and OL_I_ID.
pub const A_C_LAST: i64 = 255;
pub const A_C_ID: i64 = 1023;
pub const A_OL_I_ID: i64 = 8191;

/// The run-time constants C of NURand, one per field it draws.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NuRandConstants {
    pub c_last: i64,
    pub c_id: i64,
    pub ol_i_id: i64,
}

impl NuRandConstants {
    /// C-Load: each constant uniform in [0, A].
    pub fn for_load(rng: &mut impl Rng) -> Self {
        NuRandConstants {
            c_last: rng.gen_range(0..=A_C_LAST),
            c_id: rng.gen_range(0..=A_C_ID),
            ol_i_id: rng.gen_range(0..=A_OL_I_ID),
        }
    }

    /// C-Run for a database loaded with `load`: C_LAST differs by an allowed delta.
    pub fn for_run(load: &NuRandConstants, rng: &mut impl Rng) -> Self {
        let c_last = loop {
            let candidate = rng.gen_range(0..=A_C_LAST);
            if c_last_delta_allowed(load.c_last, candidate) {
                break candidate;
            }
        };
        NuRandConstants {
            c_last,
            c_id: rng.gen_range(0..=A_C_ID),
            ol_i_id: rng.gen_range(0..=A_OL_I_ID),
        }
    }
}

/// Clause 2.1.6.1: |C-Run − C-Load| for C_LAST in [65, 119] and not 96 or 112.
pub fn c_last_delta_allowed(load: i64, run: i64) -> bool {
    let delta = (run - load).abs();
    (65..=119).contains(&delta) && delta != 96 && delta != 112
}

/// NURand(A, x, y) with constant `c`.
pub fn nurand(rng: &mut impl Rng, a: i64, x: i64, y: i64, c: i64) -> i64 {
    (((rng.gen_range(0..=a) | rng.gen_range(x..=y)) + c) % (y - x + 1)) + x
}

/// The last name numbered `number` (0..=999).
pub fn last_name(number: i64) -> String {
    let n = number.clamp(0, 999) as usize;
    let mut name = String::with_capacity(15);
    name.push_str(SYLLABLES[n / 100]);
    name.push_str(SYLLABLES[(n / 10) % 10]);
    name.push_str(SYLLABLES[n % 10]);
    name
}

const ALPHANUMERIC: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";

/// A random a-string of length in [min, max].
pub fn a_string(rng: &mut impl Rng, min: usize, max: usize) -> String {
    let len = rng.gen_range(min..=max);
    (0..len)
        .map(|_| ALPHANUMERIC[rng.gen_range(0..ALPHANUMERIC.len())] as char)
        .collect()
}

/// A random n-string (digits) of length in [min, max].
pub fn n_string(rng: &mut impl Rng, min: usize, max: usize) -> String {
    let len = rng.gen_range(min..=max);
    (0..len)
        .map(|_| char::from(b'0' + rng.gen_range(0..10u8)))
        .collect()
}

/// A zip code: four random digits and "11111".
pub fn zip(rng: &mut impl Rng) -> String {
    let mut z = n_string(rng, 4, 4);
    z.push_str("11111");
    z
}

/// A state: two random letters.
pub fn state(rng: &mut impl Rng) -> String {
    (0..2)
        .map(|_| char::from(b'A' + rng.gen_range(0..26u8)))
        .collect()
}

/// I_DATA / S_DATA: an a-string of [min, max] characters; in 10% of rows "ORIGINAL" is
/// placed at a random position (clause 4.3.3.1).
pub fn data_with_original(rng: &mut impl Rng, min: usize, max: usize) -> String {
    let mut data = a_string(rng, min, max);
    if rng.gen_range(0..10) == 0 {
        let start = rng.gen_range(0..=data.len() - 8);
        data.replace_range(start..start + 8, "ORIGINAL");
    }
    data
}

/// A money amount uniform in [min_cents, max_cents] cents, as a float of dollars.
pub fn money(rng: &mut impl Rng, min_cents: i64, max_cents: i64) -> f64 {
    rng.gen_range(min_cents..=max_cents) as f64 / 100.0
}

/// A rate with four decimals uniform in [min, max] ten-thousandths (W_TAX, C_DISCOUNT).
pub fn rate(rng: &mut impl Rng, min: i64, max: i64) -> f64 {
    rng.gen_range(min..=max) as f64 / 10_000.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::SmallRng;
    use rand::SeedableRng;

    #[test]
    fn last_names_follow_the_syllable_table() {
        assert_eq!(last_name(0), "BARBARBAR");
        assert_eq!(last_name(371), "PRICALLYOUGHT");
        assert_eq!(last_name(999), "EINGEINGEING");
        assert_eq!(last_name(40), "BARPRESBAR");
        // Every last name fits C_LAST (16 characters).
        assert!((0..1000).all(|n| last_name(n).len() <= 16));
        // 1000 distinct names.
        let names: std::collections::HashSet<_> = (0..1000).map(last_name).collect();
        assert_eq!(names.len(), 1000);
    }

    #[test]
    fn nurand_stays_in_range_and_is_skewed() {
        let mut rng = SmallRng::seed_from_u64(1);
        let c = 123;
        let mut counts = vec![0u32; 3001];
        for _ in 0..300_000 {
            let v = nurand(&mut rng, A_C_ID, 1, 3000, c);
            assert!((1..=3000).contains(&v));
            counts[v as usize] += 1;
        }
        // Uniform would give 100 per value; NURand's OR makes some values far more likely.
        let max = *counts.iter().max().unwrap();
        let min = *counts[1..].iter().min().unwrap();
        assert!(max > 250, "max count {max}");
        assert!(min < 60, "min count {min}");
        let mut rng = SmallRng::seed_from_u64(2);
        for _ in 0..10_000 {
            let v = nurand(&mut rng, A_C_LAST, 0, 999, 200);
            assert!((0..=999).contains(&v));
            let v = nurand(&mut rng, A_OL_I_ID, 1, 100_000, 5000);
            assert!((1..=100_000).contains(&v));
        }
    }

    #[test]
    fn run_constants_obey_the_delta_rule() {
        let mut rng = SmallRng::seed_from_u64(3);
        for _ in 0..1000 {
            let load = NuRandConstants::for_load(&mut rng);
            assert!((0..=A_C_LAST).contains(&load.c_last));
            let run = NuRandConstants::for_run(&load, &mut rng);
            let delta = (run.c_last - load.c_last).abs();
            assert!((65..=119).contains(&delta) && delta != 96 && delta != 112);
            assert!((0..=A_C_ID).contains(&run.c_id));
            assert!((0..=A_OL_I_ID).contains(&run.ol_i_id));
        }
        assert!(!c_last_delta_allowed(0, 96));
        assert!(!c_last_delta_allowed(112, 0));
        assert!(!c_last_delta_allowed(0, 64));
        assert!(c_last_delta_allowed(0, 65));
        assert!(c_last_delta_allowed(200, 81));
    }

    #[test]
    fn strings_have_the_right_shape() {
        let mut rng = SmallRng::seed_from_u64(4);
        let mut original = 0;
        for _ in 0..10_000 {
            let s = a_string(&mut rng, 8, 16);
            assert!((8..=16).contains(&s.len()));
            assert!(s.bytes().all(|b| b.is_ascii_alphanumeric()));
            let n = n_string(&mut rng, 16, 16);
            assert!(n.len() == 16 && n.bytes().all(|b| b.is_ascii_digit()));
            let z = zip(&mut rng);
            assert!(z.len() == 9 && z.ends_with("11111"));
            let d = data_with_original(&mut rng, 26, 50);
            assert!((26..=50).contains(&d.len()));
            if d.contains("ORIGINAL") {
                original += 1;
            }
            let m = money(&mut rng, 100, 500_000);
            assert!((1.0..=5000.0).contains(&m));
        }
        // 10% ± a generous margin.
        assert!(
            (800..=1200).contains(&original),
            "{original} ORIGINAL of 10000"
        );
    }
}
