//! The vector files' JSON style: serde_json's pretty printer, except that an
//! array inside an array (a `[key, value]` pair, an operation) stays on one
//! line, so that the files remain short enough to read.

use std::io::{self, Write};

use serde::Serialize;
use serde_json::ser::{Formatter, PrettyFormatter};
use serde_json::Value;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Open {
    Object,
    Array,
    /// An array written on one line.
    Inline,
}

struct VectorFormatter {
    pretty: PrettyFormatter<'static>,
    open: Vec<Open>,
}

impl VectorFormatter {
    fn inline(&self) -> bool {
        self.open.last() == Some(&Open::Inline)
    }
}

impl Formatter for VectorFormatter {
    fn begin_array<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        if matches!(self.open.last(), Some(Open::Array | Open::Inline)) {
            self.open.push(Open::Inline);
            return w.write_all(b"[");
        }
        self.open.push(Open::Array);
        self.pretty.begin_array(w)
    }

    fn end_array<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        match self.open.pop() {
            Some(Open::Inline) => w.write_all(b"]"),
            _ => self.pretty.end_array(w),
        }
    }

    fn begin_array_value<W: ?Sized + Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        match (self.inline(), first) {
            (true, true) => Ok(()),
            (true, false) => w.write_all(b", "),
            (false, _) => self.pretty.begin_array_value(w, first),
        }
    }

    fn end_array_value<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        if self.inline() {
            return Ok(());
        }
        self.pretty.end_array_value(w)
    }

    fn begin_object<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.open.push(Open::Object);
        self.pretty.begin_object(w)
    }

    fn end_object<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.open.pop();
        self.pretty.end_object(w)
    }

    fn begin_object_key<W: ?Sized + Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        self.pretty.begin_object_key(w, first)
    }

    fn begin_object_value<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.pretty.begin_object_value(w)
    }

    fn end_object_value<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.pretty.end_object_value(w)
    }
}

/// `value` in the vector files' style, with a final newline.
pub fn to_text(value: &Value) -> String {
    let mut out = Vec::new();
    let formatter = VectorFormatter { pretty: PrettyFormatter::new(), open: Vec::new() };
    value.serialize(&mut serde_json::Serializer::with_formatter(&mut out, formatter)).expect("JSON");
    out.push(b'\n');
    String::from_utf8(out).expect("JSON is UTF-8")
}
