//! What every endpoint shares: refusals as HTTP answers, query parameters, a read the client
//! stopped wanting, and blocking work off the runtime.

use crate::archive::{ReadError, StoredErrorKind};
use crate::BeneathWindow;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Serialize;
use std::ops::Bound;
use std::sync::Arc;

/// A refusal: a status and a JSON body with the refusal's own message.
#[derive(Debug)]
pub(super) struct ApiError {
    status: StatusCode,
    body: Refusal,
    retry: bool,
}

#[derive(Debug, Serialize)]
struct Refusal {
    error: &'static str,
    message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    floor: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    axis: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tier: Option<&'static str>,
}

impl ApiError {
    pub(super) fn new(status: StatusCode, error: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            body: Refusal {
                error,
                message: message.into(),
                floor: None,
                axis: None,
                tier: None,
            },
            retry: false,
        }
    }

    pub(super) fn bad(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "bad_request", message)
    }

    pub(super) fn too_large(message: impl Into<String>) -> Self {
        Self::new(StatusCode::PAYLOAD_TOO_LARGE, "too_large", message)
    }

    pub(super) fn unreadable(message: impl Into<String>) -> Self {
        Self::new(StatusCode::SERVICE_UNAVAILABLE, "unreadable", message)
    }

    pub(super) fn message(&self) -> &str {
        &self.body.message
    }

    fn floor(floor: u64, axis: Option<u64>, tier: Option<&'static str>, message: String) -> Self {
        let mut e = Self::new(StatusCode::RANGE_NOT_SATISFIABLE, "floor", message);
        e.body.floor = Some(floor);
        e.body.axis = axis;
        e.body.tier = tier;
        e
    }
}

impl From<ReadError> for ApiError {
    fn from(e: ReadError) -> Self {
        match e {
            ReadError::Refused(r) => match r {
                BeneathWindow::Floor { floor, axis } => {
                    let message = r.to_string();
                    ApiError::floor(floor.0, axis, Some("raw"), message)
                }
                BeneathWindow::Unserved => {
                    ApiError::new(StatusCode::NOT_FOUND, "unserved", r.to_string())
                }
                BeneathWindow::Unreadable(u) => {
                    let mut e =
                        ApiError::unreadable(BeneathWindow::Unreadable(u.clone()).to_string());
                    e.retry = u.is_transient();
                    e
                }
            },
            ReadError::Stored(s) => {
                let transient = s.kind == StoredErrorKind::Unavailable;
                let mut e = ApiError::unreadable(BeneathWindow::from(s).to_string());
                e.retry = transient;
                e
            }
            ReadError::Floor { tier, floor, axis } => {
                let message = ReadError::Floor { tier, floor, axis }.to_string();
                ApiError::floor(floor.0, Some(axis), Some(tier), message)
            }
            e @ (ReadError::UnknownStream(_)
            | ReadError::NotSelected(_)
            | ReadError::NotSurveyable { .. }) => {
                ApiError::new(StatusCode::NOT_FOUND, "unserved", e.to_string())
            }
            e @ (ReadError::BadSelection(_) | ReadError::Budget { .. }) => {
                ApiError::bad(e.to_string())
            }
            e @ ReadError::Abandoned => ApiError::unreadable(e.to_string()),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = (self.status, Json(self.body)).into_response();
        if self.retry {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        }
        response
    }
}

/// A request's query parameters, checked against what the endpoint takes.
pub(super) struct Params {
    pairs: Vec<(String, String)>,
}

impl Params {
    /// Parses the query; a parameter the endpoint does not take, or one given twice (but
    /// `track`), is refused.
    pub(super) fn parse(query: Option<&str>, takes: &[&str]) -> Result<Params, ApiError> {
        let pairs: Vec<(String, String)> =
            url::form_urlencoded::parse(query.unwrap_or("").as_bytes())
                .map(|(k, v)| (k.into_owned(), v.into_owned()))
                .collect();
        for (i, (k, _)) in pairs.iter().enumerate() {
            if k == "access_token" {
                continue;
            }
            if !takes.contains(&k.as_str()) {
                return Err(ApiError::bad(format!(
                    "unknown parameter {k:?}; this endpoint takes {}",
                    takes.join(", ")
                )));
            }
            if k != "track" && pairs[..i].iter().any(|(p, _)| p == k) {
                return Err(ApiError::bad(format!("parameter {k:?} is given twice")));
            }
        }
        Ok(Params { pairs })
    }

    pub(super) fn get(&self, key: &str) -> Option<&str> {
        self.pairs
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    pub(super) fn stream(&self) -> Result<String, ApiError> {
        match self.get("stream") {
            Some(s) if !s.is_empty() => Ok(s.to_owned()),
            _ => Err(ApiError::bad(
                "parameter \"stream\" is required (GET /api/streams lists them)",
            )),
        }
    }

    /// The track selection: repeated `track=`, outermost label first.
    pub(super) fn track(&self) -> Vec<String> {
        self.pairs
            .iter()
            .filter(|(k, _)| k == "track")
            .map(|(_, v)| v.clone())
            .collect()
    }

    pub(super) fn number(&self, key: &str) -> Result<Option<u64>, ApiError> {
        self.get(key)
            .map(|v| {
                v.parse::<u64>().map_err(|_| {
                    ApiError::bad(format!(
                        "parameter {key:?} is {v:?}, not a non-negative integer"
                    ))
                })
            })
            .transpose()
    }

    /// `from` and `to`, either absent; `to ≤ from` is refused.
    pub(super) fn bounds(&self) -> Result<(Option<u64>, Option<u64>), ApiError> {
        let (from, to) = (self.number("from")?, self.number("to")?);
        if let (Some(f), Some(t)) = (from, to) {
            if t <= f {
                return Err(ApiError::bad(format!(
                    "to {t} is not above from {f}; the range is [from, to)"
                )));
            }
        }
        Ok((from, to))
    }

    /// [`Params::bounds`] as the range `[from, to)`.
    pub(super) fn range(&self) -> Result<(Bound<u64>, Bound<u64>), ApiError> {
        let (from, to) = self.bounds()?;
        Ok((
            from.map_or(Bound::Unbounded, Bound::Included),
            to.map_or(Bound::Unbounded, Bound::Excluded),
        ))
    }
}

/// Whether the request is still wanted: false once the request's future was dropped (its
/// client went away), which a blocking read checks between row groups.
#[derive(Clone, Default)]
pub(super) struct Wanted(Arc<std::sync::atomic::AtomicBool>);

impl Wanted {
    pub(super) fn still(&self) -> bool {
        !self.0.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// Marks the request abandoned when dropped: hold it in the request's future.
pub(super) struct Abandon(Wanted);

impl Abandon {
    pub(super) fn new() -> (Abandon, Wanted) {
        let wanted = Wanted::default();
        (Abandon(wanted.clone()), wanted)
    }
}

impl Drop for Abandon {
    fn drop(&mut self) {
        (self.0).0.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Runs a blocking read on the pool, as one request.
pub(super) async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, ApiError> + Send + 'static,
) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(work)
        .await
        .unwrap_or_else(|e| Err(ApiError::unreadable(format!("the read failed: {e}"))))
}
