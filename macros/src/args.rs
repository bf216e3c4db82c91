//! The attribute's arguments: `id = "..", window = N, track = (..), axis = ..`.

use proc_macro2::Span;
use syn::ext::IdentExt;
use syn::parse::{Parse, ParseStream};
use syn::{token, Ident, LitInt, LitStr, Token};

/// The deepest a track may be declared (the contract's `MAX_DEPTH`).
pub(crate) const MAX_DEPTH: usize = 4;

/// The keys the attribute takes, in the order the docs list them.
const KEYS: &str = "`id`, `window`, `track` and `axis`";

/// What `#[stream(..)]` was given, checked for shape but not yet against the struct.
pub(crate) struct Args {
    /// The stream id, already checked to be a plain identifier.
    pub id: LitStr,
    /// The window in rows, already checked to be at least one.
    pub window: usize,
    /// The track components, outermost first (one to four, no repeats); empty when untracked.
    pub track: Vec<Ident>,
    /// Where the track tuple was written (the call site when untracked).
    pub track_span: Span,
    /// The axis field, if declared.
    pub axis: Option<Ident>,
}

impl Parse for Args {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let mut id: Option<LitStr> = None;
        let mut window: Option<usize> = None;
        let mut track: Option<(Vec<Ident>, Span)> = None;
        let mut axis: Option<Ident> = None;

        while !input.is_empty() {
            // Any word is read as a key so that `type = ..` gets the unknown-key message.
            let key = input.call(Ident::parse_any).map_err(|e| {
                syn::Error::new(
                    e.span(),
                    format!("expected a key: #[stream] takes {KEYS}, e.g. `#[stream(id = \"capture\", window = 4096)]`"),
                )
            })?;
            let name = key.unraw().to_string();
            let seen = match name.as_str() {
                "id" => id.is_some(),
                "window" => window.is_some(),
                "track" => track.is_some(),
                "axis" => axis.is_some(),
                _ => {
                    return Err(syn::Error::new(
                        key.span(),
                        format!("unknown key `{name}`: #[stream] takes {KEYS}"),
                    ))
                }
            };
            if seen {
                return Err(syn::Error::new(
                    key.span(),
                    format!("duplicate key `{name}`: give each key once"),
                ));
            }
            input.parse::<Token![=]>().map_err(|e| {
                syn::Error::new(
                    e.span(),
                    format!("expected `=` after `{name}`, e.g. `{}`", example(&name)),
                )
            })?;
            match name.as_str() {
                "id" => id = Some(parse_id(input)?),
                "window" => window = Some(parse_window(input)?),
                "track" => track = Some(parse_track(input)?),
                _ => axis = Some(parse_axis(input)?),
            }
            if input.is_empty() {
                break;
            }
            input.parse::<Token![,]>().map_err(|e| {
                syn::Error::new(
                    e.span(),
                    "expected `,` between keys, e.g. `id = \"capture\", window = 4096`",
                )
            })?;
        }

        let id = id.ok_or_else(|| {
            syn::Error::new(
                Span::call_site(),
                "missing `id`: every stream needs one, e.g. `#[stream(id = \"capture\", window = 4096)]`",
            )
        })?;
        let window = window.ok_or_else(|| {
            syn::Error::new(
                Span::call_site(),
                "missing `window`: say how many rows the runtime keeps in memory, e.g. `window = 4096`",
            )
        })?;
        let (track, track_span) = track.unwrap_or_else(|| (Vec::new(), Span::call_site()));
        Ok(Args {
            id,
            window,
            track,
            track_span,
            axis,
        })
    }
}

/// An example of a key's use, for messages.
fn example(key: &str) -> &'static str {
    match key {
        "id" => "id = \"capture\"",
        "window" => "window = 4096",
        "track" => "track = (run, probe)",
        _ => "axis = ordinal",
    }
}

/// `id = "capture"`: a string literal holding a plain identifier.
fn parse_id(input: ParseStream<'_>) -> syn::Result<LitStr> {
    if !input.peek(LitStr) {
        return Err(input.error("`id` takes a string literal, e.g. `id = \"capture\"`"));
    }
    let lit: LitStr = input.parse()?;
    let value = lit.value();
    if value.is_empty() {
        return Err(syn::Error::new(
            lit.span(),
            "the stream id is empty: write a plain identifier, e.g. `id = \"capture\"`",
        ));
    }
    if let Some(bad) = value
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || *c == '_' || *c == '-'))
    {
        let suggestion: String = value
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        return Err(syn::Error::new(
            lit.span(),
            format!(
                "the stream id {value:?} holds {bad:?}, so it is not a plain identifier: use only ASCII letters, digits, `_` and `-`, e.g. `id = {suggestion:?}`"
            ),
        ));
    }
    Ok(lit)
}

/// `window = 4096`: an integer literal of at least one.
fn parse_window(input: ParseStream<'_>) -> syn::Result<usize> {
    if !input.peek(LitInt) {
        return Err(input.error("`window` takes an integer literal of rows, e.g. `window = 4096`"));
    }
    let lit: LitInt = input.parse()?;
    if !matches!(lit.suffix(), "" | "usize") {
        return Err(syn::Error::new(
            lit.span(),
            "`window` is a count of rows: write it without a type suffix, e.g. `window = 4096`",
        ));
    }
    let window: usize = lit.base10_parse().map_err(|_| {
        syn::Error::new(
            lit.span(),
            "`window` does not fit in a usize: write a smaller count of rows, e.g. `window = 4096`",
        )
    })?;
    if window == 0 {
        return Err(syn::Error::new(
            lit.span(),
            "`window = 0` keeps no rows: the window must be at least 1, e.g. `window = 4096`",
        ));
    }
    Ok(window)
}

/// `track = (run, probe)`: one to four distinct field names in parentheses, and where the
/// parentheses are.
fn parse_track(input: ParseStream<'_>) -> syn::Result<(Vec<Ident>, Span)> {
    if !input.peek(token::Paren) {
        if input.peek(Ident::peek_any) {
            let name = input.call(Ident::parse_any)?;
            return Err(syn::Error::new(
                name.span(),
                format!(
                    "`track` takes a parenthesized tuple of field names: write `track = ({name})`"
                ),
            ));
        }
        return Err(input.error(
            "`track` takes a parenthesized tuple of field names, e.g. `track = (run, probe)`",
        ));
    }
    let content;
    let paren = syn::parenthesized!(content in input);
    let mut names: Vec<Ident> = Vec::new();
    while !content.is_empty() {
        let name: Ident = content.parse().map_err(|e| {
            syn::Error::new(
                e.span(),
                "a track component is a field name of the struct, e.g. `track = (run, probe)`",
            )
        })?;
        let text = name.unraw().to_string();
        if names.iter().any(|n| n.unraw() == text) {
            return Err(syn::Error::new(
                name.span(),
                format!(
                    "field `{text}` appears twice in the track: name each field once, e.g. `track = ({})`",
                    names.iter().map(|n| n.unraw().to_string()).collect::<Vec<_>>().join(", "),
                ),
            ));
        }
        if names.len() == MAX_DEPTH {
            return Err(syn::Error::new(
                name.span(),
                format!(
                    "a track has at most {MAX_DEPTH} components and `{text}` is component {}: drop it, or fold components into one field",
                    MAX_DEPTH + 1
                ),
            ));
        }
        names.push(name);
        if content.is_empty() {
            break;
        }
        content.parse::<Token![,]>().map_err(|e| {
            syn::Error::new(
                e.span(),
                "separate track components with `,`, e.g. `track = (run, probe)`",
            )
        })?;
    }
    if names.is_empty() {
        return Err(syn::Error::new(
            paren.span.join(),
            "`track = ()` declares no component: name at least one field, e.g. `track = (run)`, or leave `track` out for an untracked stream",
        ));
    }
    Ok((names, paren.span.join()))
}

/// `axis = ordinal`: one field name.
fn parse_axis(input: ParseStream<'_>) -> syn::Result<Ident> {
    if input.peek(Ident) {
        return input.parse();
    }
    if input.peek(token::Paren) {
        let content;
        let paren = syn::parenthesized!(content in input);
        let hint = content
            .parse::<Ident>()
            .map(|i| i.to_string())
            .unwrap_or_else(|_| "ordinal".to_owned());
        return Err(syn::Error::new(
            paren.span.join(),
            format!("`axis` takes one field name, not a tuple: write `axis = {hint}`"),
        ));
    }
    Err(input.error("`axis` takes the name of a u64 field, e.g. `axis = ordinal`"))
}
