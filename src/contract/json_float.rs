//! Floats in JSON: JSON has no NaN or infinity, and `serde_json` writes them as `null`, which
//! a reader cannot tell from "no value". A non-finite value is written as the string `"NaN"`,
//! `"Infinity"` or `"-Infinity"` (the spellings DuckDB, pandas and JavaScript's `Number`
//! parse) and read back from them; finite values stay plain numbers.

use serde::de::{self, Deserializer, Visitor};
use serde::Serializer;
use std::fmt;

/// Serializes an `f64`, naming a non-finite value as a string.
pub fn serialize<S: Serializer>(value: &f64, s: S) -> Result<S::Ok, S::Error> {
    if value.is_finite() {
        s.serialize_f64(*value)
    } else if value.is_nan() {
        s.serialize_str("NaN")
    } else if *value > 0.0 {
        s.serialize_str("Infinity")
    } else {
        s.serialize_str("-Infinity")
    }
}

/// Reads an `f64` written by [`serialize`]: a number, or one of the three names.
pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    struct Float;
    impl Visitor<'_> for Float {
        type Value = f64;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a number, \"NaN\", \"Infinity\" or \"-Infinity\"")
        }
        fn visit_f64<E: de::Error>(self, v: f64) -> Result<f64, E> {
            Ok(v)
        }
        fn visit_i64<E: de::Error>(self, v: i64) -> Result<f64, E> {
            Ok(v as f64)
        }
        fn visit_u64<E: de::Error>(self, v: u64) -> Result<f64, E> {
            Ok(v as f64)
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<f64, E> {
            match v {
                "NaN" => Ok(f64::NAN),
                "Infinity" => Ok(f64::INFINITY),
                "-Infinity" => Ok(f64::NEG_INFINITY),
                other => Err(E::invalid_value(de::Unexpected::Str(other), &self)),
            }
        }
    }
    d.deserialize_any(Float)
}

/// The same for an optional value (`None` stays `null`: no value, which is not a NaN).
pub mod option {
    use serde::{Deserialize, Deserializer, Serializer};

    /// Serializes `Some` as [`super::serialize`] does, `None` as `null`.
    pub fn serialize<S: Serializer>(value: &Option<f64>, s: S) -> Result<S::Ok, S::Error> {
        match value {
            Some(v) => super::serialize(v, s),
            None => s.serialize_none(),
        }
    }

    /// Reads what [`serialize`] writes.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
        #[derive(Deserialize)]
        struct Wrapped(#[serde(with = "super")] f64);
        Ok(Option::<Wrapped>::deserialize(d)?.map(|w| w.0))
    }
}

#[cfg(test)]
mod tests {
    use crate::contract::{Aggregate, Aggregated, Bucket};

    #[test]
    fn non_finite_values_survive_json_and_are_not_null() {
        let mut b = Bucket::of(0, 7, f64::NAN);
        b.push(8, f64::INFINITY);
        b.push(9, f64::NEG_INFINITY);
        let text = serde_json::to_string(&b).expect("serializes");
        assert!(!text.contains("null"), "{text}");
        assert!(
            text.contains("\"NaN\"") && text.contains("\"-Infinity\""),
            "{text}"
        );
        let back: Bucket = serde_json::from_str(&text).expect("parses back");
        assert!(back.first.value.is_nan());
        assert_eq!(back.last.value, f64::NEG_INFINITY);
        assert_eq!(back.count, 3);
        let finite = Bucket::of(1, 2, 2.5);
        let text = serde_json::to_string(&finite).expect("serializes");
        assert!(text.contains("\"value\":2.5"), "{text}");
        assert_eq!(
            serde_json::from_str::<Bucket>(&text).expect("parses"),
            finite
        );
        for value in [None, Some(f64::INFINITY), Some(1.5)] {
            let a = Aggregated {
                field: 0,
                kind: Aggregate::Mean,
                value,
                count: 1,
            };
            let text = serde_json::to_string(&a).expect("serializes");
            let back: Aggregated = serde_json::from_str(&text).expect("parses");
            assert_eq!(back.value, value, "{text}");
        }
    }
}
