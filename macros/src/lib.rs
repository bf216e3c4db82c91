//! The `#[stream]` declaration for series-archive rows.
//!
//! Use it through its re-export, `series_archive::stream`; the generated code names the
//! contract by `::series_archive::` paths. See [`macro@stream`] for the syntax and every
//! refusal.
#![warn(missing_docs)]

mod args;
mod expand;
mod row;

use proc_macro::TokenStream;

/// Declares a row struct as a stream: its id, its window, and optionally its track and axis.
///
/// ```ignore
/// #[series_archive::stream(id = "capture", window = 4096, track = (run, probe), axis = ordinal)]
/// #[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
/// pub struct Capture { pub run: u32, pub probe: String, pub ordinal: u64, pub value: i64 }
/// ```
///
/// The struct is emitted unchanged, followed by:
///
/// - `impl ::series_archive::Stream` — always: `ID`, `WINDOW`, `TRACK_FIELDS` (the track's
///   field names, outermost first, or `&[]`) and `AXIS_FIELD` (`Some("ordinal")` or `None`).
///   `Stream` requires `Serialize + DeserializeOwned + Send + Sync + 'static`, so derive
///   serde on the struct.
/// - `impl ::series_archive::Tracked` — with `track = (..)`: `type Track` is the tuple of the
///   named fields' own declared types (one component is the one-tuple `(T,)`), `TRACK` their
///   names, and `track()` clones them out of the row. Each component type must be a `Label`.
/// - `impl ::series_archive::Axial` — with `axis = ..`: `AXIS` is the field's name and
///   `axis()` returns it.
///
/// Nothing reads a field name for meaning: the names only say which fields the declaration
/// claims.
///
/// # Keys
///
/// Keys are separated by commas and may come in any order.
///
/// | key | value | |
/// |---|---|---|
/// | `id` | a string literal holding a plain identifier, `[A-Za-z0-9_-]+` | required |
/// | `window` | an integer literal, at least 1: the rows the runtime keeps in memory | required |
/// | `track` | a parenthesized tuple of one to four distinct field names: `(probe)`, `(run,)`, `(run, probe)` | optional; absent means untracked |
/// | `axis` | one field name whose type is `u64`, not in the track | optional |
///
/// # Refusals
///
/// Each is a compile error spanned at the offending token, saying what to write instead.
///
/// - **Arguments:** an unknown key (`#[stream]` takes `id`, `window`, `track`, `axis`); a
///   key given twice; a missing `id` or `window` (reported at the attribute); an `id` that
///   is not a string literal, is empty, or holds anything but ASCII letters, digits, `_` and
///   `-`; a `window` that is not an integer literal, is `0`, does not fit a `usize` or has a
///   suffix other than `usize`.
/// - **Track:** a bare name (`track = run`: write `track = (run)`); an empty tuple
///   (`track = ()`: name a field, or leave `track` out); a field named twice
///   (`track = (run, run)`); a fifth component (a track is at most four deep); the axis
///   field as a component; a name that is not a field of the struct.
/// - **Axis:** a tuple (`axis = (ordinal)`: write `axis = ordinal`); a name that is not a
///   field of the struct; a field whose type is not `u64`. The type check is syntactic
///   where it can be — a reference, tuple, array, generic path, or another primitive or
///   standard type name (`i64`, `u32`, `String`, `Option<..>`, ..) is refused by name — and
///   otherwise (a type alias, say) a trait bound refuses any type that is not `u64` once
///   types are known, naming the field and the type.
/// - **Struct:** anything but a struct with named fields (a tuple or unit struct, an enum, a
///   union, any other item); generic parameters or a `where` clause; a field named
///   `_position` or `_seq`, which the archive's storage columns take.
///
/// On a refusal the struct is still emitted, so the error is the only one reported.
#[proc_macro_attribute]
pub fn stream(attr: TokenStream, item: TokenStream) -> TokenStream {
    let original = proc_macro2::TokenStream::from(item.clone());
    let parsed = match syn::parse::<syn::Item>(item) {
        Ok(parsed) => parsed,
        Err(e) => {
            let mut out = original;
            out.extend(e.to_compile_error());
            return out.into();
        }
    };

    let mut errors = Errors::default();
    let args = syn::parse::<args::Args>(attr)
        .map_err(|e| errors.push(e))
        .ok();
    let row = row::Row::check(&parsed).map_err(|e| errors.push(e)).ok();
    let generated = match (args, row) {
        (Some(args), Some(row)) => expand::expand(&args, &row).map_err(|e| errors.push(e)).ok(),
        _ => None,
    };

    let mut out = original;
    match errors.finish(()) {
        Ok(()) => out.extend(generated),
        Err(e) => out.extend(e.to_compile_error()),
    }
    out.into()
}

/// Refusals gathered so that one declaration reports all of them at once.
#[derive(Default)]
pub(crate) struct Errors(Option<syn::Error>);

impl Errors {
    /// Adds a refusal.
    pub(crate) fn push(&mut self, e: syn::Error) {
        match &mut self.0 {
            Some(all) => all.combine(e),
            None => self.0 = Some(e),
        }
    }

    /// `ok` when nothing was refused, else every refusal.
    pub(crate) fn finish<T>(self, ok: T) -> syn::Result<T> {
        match self.0 {
            Some(e) => Err(e),
            None => Ok(ok),
        }
    }
}
