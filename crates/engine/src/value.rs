//! Values and rows as the `Tx` API passes them: plain data, serialisable.

use serde::{Deserialize, Serialize};

/// One column value.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Value {
    Null,
    Int(i64),
    Float(f64),
    Str(String),
}

/// One column value borrowed from its row ([`crate::RowRef::value_ref`]): a string is not
/// copied (a damaged one, not UTF-8, is decoded lossily into a copy, as [`Value`] is).
#[derive(Clone, Debug, PartialEq)]
pub enum ValueRef<'a> {
    Null,
    Int(i64),
    Float(f64),
    Str(std::borrow::Cow<'a, str>),
}

/// A row: values in column order (or in the order a projection asked for).
pub type Row = Vec<Value>;

impl<'a> From<&'a Value> for ValueRef<'a> {
    /// The value, borrowed.
    fn from(v: &'a Value) -> Self {
        match v {
            Value::Null => ValueRef::Null,
            Value::Int(i) => ValueRef::Int(*i),
            Value::Float(f) => ValueRef::Float(*f),
            Value::Str(s) => ValueRef::Str(std::borrow::Cow::Borrowed(s)),
        }
    }
}

impl Value {
    /// The integer inside, or `None` for any other kind.
    pub fn as_int(&self) -> Option<i64> {
        match self {
            Value::Int(v) => Some(*v),
            _ => None,
        }
    }

    pub fn as_float(&self) -> Option<f64> {
        match self {
            Value::Float(v) => Some(*v),
            Value::Int(v) => Some(*v as f64),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }

    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }
}

impl From<i64> for Value {
    fn from(v: i64) -> Self {
        Value::Int(v)
    }
}

impl From<f64> for Value {
    fn from(v: f64) -> Self {
        Value::Float(v)
    }
}

impl From<&str> for Value {
    fn from(v: &str) -> Self {
        Value::Str(v.to_string())
    }
}

impl From<String> for Value {
    fn from(v: String) -> Self {
        Value::Str(v)
    }
}
