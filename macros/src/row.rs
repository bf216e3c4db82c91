//! The row struct: its shape, its fields, and the names a declaration may claim.

use crate::Errors;
use proc_macro2::Span;
use quote::ToTokens;
use syn::ext::IdentExt;
use syn::{Field, Fields, Ident, Item, ItemStruct, Type};

/// Field names the archive's storage columns take; a row may not declare them.
pub(crate) const RESERVED: [&str; 2] = ["_position", "_seq"];

/// A row struct with named fields and no generics.
pub(crate) struct Row<'a> {
    /// The struct as written.
    pub item: &'a ItemStruct,
    /// Its named fields, in declaration order.
    pub fields: Vec<&'a Field>,
}

impl<'a> Row<'a> {
    /// Checks the item is a struct `#[stream]` can declare, collecting every refusal.
    pub(crate) fn check(item: &'a Item) -> syn::Result<Row<'a>> {
        let item = match item {
            Item::Struct(s) => s,
            Item::Enum(e) => {
                return Err(syn::Error::new(
                    e.enum_token.span,
                    format!(
                        "#[stream] declares a row struct, and `{}` is an enum: write a struct with named fields, e.g. `struct {} {{ run: u32, value: i64 }}`",
                        e.ident, e.ident
                    ),
                ))
            }
            Item::Union(u) => {
                return Err(syn::Error::new(
                    u.union_token.span,
                    format!(
                        "#[stream] declares a row struct, and `{}` is a union: write a struct with named fields, e.g. `struct {} {{ run: u32, value: i64 }}`",
                        u.ident, u.ident
                    ),
                ))
            }
            other => {
                return Err(syn::Error::new(
                    first_token_span(other),
                    "#[stream] goes on a struct with named fields, e.g. `struct Capture { run: u32, value: i64 }`",
                ))
            }
        };

        let mut errors = Errors::default();

        if !item.generics.params.is_empty() || item.generics.where_clause.is_some() {
            errors.push(syn::Error::new_spanned(
                &item.generics,
                format!(
                    "#[stream] does not take generic row types: declare a concrete struct, e.g. `struct {} {{ .. }}` with concrete field types",
                    item.ident
                ),
            ));
        }

        let fields: Vec<&Field> = match &item.fields {
            Fields::Named(named) => named.named.iter().collect(),
            Fields::Unnamed(unnamed) => {
                errors.push(syn::Error::new(
                    unnamed.paren_token.span.join(),
                    format!(
                        "#[stream] needs named fields, and `{}` is a tuple struct: name them, e.g. `struct {} {{ run: u32, value: i64 }}`",
                        item.ident, item.ident
                    ),
                ));
                Vec::new()
            }
            Fields::Unit => {
                errors.push(syn::Error::new(
                    item.ident.span(),
                    format!(
                        "#[stream] needs named fields, and `{}` is a unit struct: give it fields, e.g. `struct {} {{ run: u32, value: i64 }}`",
                        item.ident, item.ident
                    ),
                ));
                Vec::new()
            }
        };

        for field in &fields {
            let Some(ident) = &field.ident else { continue };
            let name = ident.unraw().to_string();
            if RESERVED.contains(&name.as_str()) {
                errors.push(syn::Error::new(
                    ident.span(),
                    format!(
                        "field name `{name}` is reserved for the archive's storage column: rename the field, e.g. `{}`",
                        name.trim_start_matches('_')
                    ),
                ));
            }
        }

        errors.finish(Row { item, fields })
    }

    /// The field called `name` (raw or not), if the struct has one.
    pub(crate) fn field(&self, name: &Ident) -> Option<&'a Field> {
        let name = name.unraw();
        self.fields
            .iter()
            .copied()
            .find(|f| f.ident.as_ref().is_some_and(|i| i.unraw() == name))
    }

    /// The refusal for a declaration naming a field the struct lacks.
    pub(crate) fn no_such_field(&self, key: &str, name: &Ident) -> syn::Error {
        let have: Vec<String> = self
            .fields
            .iter()
            .filter_map(|f| f.ident.as_ref().map(|i| format!("`{}`", i.unraw())))
            .collect();
        syn::Error::new(
            name.span(),
            format!(
                "`{}` has no field `{}`: `{key}` names fields of the struct, which are {}",
                self.item.ident,
                name.unraw(),
                have.join(", ")
            ),
        )
    }
}

/// Where an item other than a struct starts, for the refusal.
fn first_token_span(item: &Item) -> Span {
    item.to_token_stream()
        .into_iter()
        .next()
        .map_or_else(Span::call_site, |t| t.span())
}

/// Primitive and standard type names that are certainly not `u64`.
const NOT_U64: [&str; 20] = [
    "u8", "u16", "u32", "u128", "usize", "i8", "i16", "i32", "i64", "i128", "isize", "f32", "f64",
    "bool", "char", "str", "String", "Vec", "Option", "Box",
];

/// Whether a type is syntactically not `u64`. A plain path that could be an alias of `u64`
/// is not refused here; the generated code's trait bound checks it once types are known.
pub(crate) fn certainly_not_u64(ty: &Type) -> bool {
    match ty {
        Type::Group(g) => certainly_not_u64(&g.elem),
        Type::Paren(p) => certainly_not_u64(&p.elem),
        Type::Path(p) if p.qself.is_none() => {
            if p.path.segments.iter().any(|s| !s.arguments.is_none()) {
                return true;
            }
            let last = p.path.segments.last().map(|s| s.ident.to_string());
            last.is_some_and(|l| NOT_U64.contains(&l.as_str()))
        }
        Type::Path(_) | Type::Macro(_) | Type::Verbatim(_) => false,
        _ => true,
    }
}

/// A type as people write it, for messages.
pub(crate) fn show(ty: &Type) -> String {
    let raw = ty.to_token_stream().to_string();
    raw.replace(" :: ", "::")
        .replace(":: ", "::")
        .replace(" < ", "<")
        .replace("< ", "<")
        .replace(" >", ">")
        .replace(" ,", ",")
        .replace("& ", "&")
        .replace("[ ", "[")
        .replace(" ]", "]")
        .replace("( ", "(")
        .replace(" )", ")")
        .replace(" ;", ";")
}
