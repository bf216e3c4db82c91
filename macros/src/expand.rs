//! The generated impls: `Stream` always, `Tracked` with a track, `Axial` with an axis.

use crate::args::Args;
use crate::row::{certainly_not_u64, show, Row};
use crate::Errors;
use proc_macro2::{Literal, TokenStream};
use quote::{quote, quote_spanned};
use syn::ext::IdentExt;
use syn::spanned::Spanned;
use syn::{Field, Ident, LitStr};

/// Checks the declaration against the struct and writes the impls.
pub(crate) fn expand(args: &Args, row: &Row<'_>) -> syn::Result<TokenStream> {
    let mut errors = Errors::default();

    // The axis first, so a track component naming it is refused as such.
    let axis: Option<(&Ident, &Field)> = match &args.axis {
        None => None,
        Some(name) => match row.field(name) {
            None => {
                errors.push(row.no_such_field("axis", name));
                None
            }
            Some(field) => {
                if certainly_not_u64(&field.ty) {
                    errors.push(syn::Error::new_spanned(
                        &field.ty,
                        format!(
                            "the axis field `{name}` has type `{ty}`, and an axis must be `u64`: declare `{name}: u64`, or name a u64 field as the axis",
                            name = name.unraw(),
                            ty = show(&field.ty),
                        ),
                    ));
                }
                Some((name, field))
            }
        },
    };

    let mut track: Vec<&Field> = Vec::with_capacity(args.track.len());
    for name in &args.track {
        if let Some(axis) = &args.axis {
            if axis.unraw() == name.unraw() {
                errors.push(syn::Error::new(
                    name.span(),
                    format!(
                        "`{name}` is the axis, so it cannot also be a track component: remove it from `track`, or name another field as the axis",
                        name = name.unraw(),
                    ),
                ));
                continue;
            }
        }
        match row.field(name) {
            Some(field) => track.push(field),
            None => errors.push(row.no_such_field("track", name)),
        }
    }

    errors.finish(())?;

    let ident = &row.item.ident;
    let id = LitStr::new(&args.id.value(), args.id.span());
    let window = Literal::usize_unsuffixed(args.window);
    let track_names: Vec<String> = args.track.iter().map(|n| n.unraw().to_string()).collect();
    let axis_field = match &args.axis {
        Some(name) => {
            let name = name.unraw().to_string();
            quote!(::core::option::Option::Some(#name))
        }
        None => quote!(::core::option::Option::None),
    };

    let mut out = quote! {
        #[automatically_derived]
        impl ::series_archive::Stream for #ident {
            const ID: &'static str = #id;
            const WINDOW: usize = #window;
            const TRACK_FIELDS: &'static [&'static str] = &[#(#track_names),*];
            const AXIS_FIELD: ::core::option::Option<&'static str> = #axis_field;
        }
    };

    if !track.is_empty() {
        let types = track.iter().map(|f| &f.ty);
        // Spanned at the declaration, so a component type that is no `Label` is refused there.
        let tuple = quote_spanned!(args.track_span=> (#(#types,)*));
        let members = track.iter().map(|f| &f.ident);
        out.extend(quote! {
            #[automatically_derived]
            impl ::series_archive::Tracked for #ident {
                type Track = #tuple;
                const TRACK: &'static [&'static str] = &[#(#track_names),*];
                #[inline]
                fn track(&self) -> <Self as ::series_archive::Tracked>::Track {
                    (#(::core::clone::Clone::clone(&self.#members),)*)
                }
            }
        });
    }

    if let Some((name, field)) = axis {
        let text = name.unraw().to_string();
        let ty = &field.ty;
        let member = &field.ident;
        let message =
            format!("the axis field `{text}` has type `{{Self}}`, and an axis must be `u64`");
        let label = "an axis must be `u64`".to_owned();
        let note = format!("declare `{text}: u64`, or name a u64 field as the axis");
        // Spanned at the field's type, so an alias that is not u64 is refused there.
        let value = quote_spanned! {ty.span()=>
            {
                #[diagnostic::on_unimplemented(message = #message, label = #label, note = #note)]
                trait AxisIsU64 {
                    fn axis_u64(self) -> ::core::primitive::u64;
                }
                impl AxisIsU64 for ::core::primitive::u64 {
                    #[inline]
                    fn axis_u64(self) -> ::core::primitive::u64 {
                        self
                    }
                }
                <#ty as AxisIsU64>::axis_u64(self.#member)
            }
        };
        out.extend(quote! {
            #[automatically_derived]
            impl ::series_archive::Axial for #ident {
                const AXIS: &'static str = #text;
                #[inline]
                fn axis(&self) -> ::core::primitive::u64 {
                    #value
                }
            }
        });
    }

    Ok(out)
}
