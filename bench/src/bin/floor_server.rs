//! Floor server: the least an HTTP webhook endpoint can do on this machine.
//!
//! axum + tokio (multi-thread runtime, the same stack as svc-controller), one route:
//! `POST /{*path}` checks that header `x-svc-sign` is the hex HMAC-SHA-256 of the raw body
//! with the secret and answers 200 with a small JSON body, 401 otherwise. Nothing else:
//! no logging, no metrics, no work.
//!
//! Usage: `floor-server <listen address> <secret>`.

use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::post;
use axum::serve::ListenerExt;
use hmac::{Hmac, Mac};
use sha2::Sha256;

const OK: &str = r#"{"code":200,"message":"","data":null}"#;
const REFUSED: &str = r#"{"code":401,"message":"signature does not match","data":null}"#;

async fn hook(
    State(secret): State<Arc<[u8]>>,
    headers: HeaderMap,
    body: Bytes,
) -> impl IntoResponse {
    let valid = headers
        .get("x-svc-sign")
        .and_then(|v| hex::decode(v.as_bytes()).ok())
        .is_some_and(|given| {
            let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(&secret) else {
                return false;
            };
            mac.update(&body);
            mac.verify_slice(&given).is_ok()
        });
    let (status, text) = if valid {
        (StatusCode::OK, OK)
    } else {
        (StatusCode::UNAUTHORIZED, REFUSED)
    };
    (status, [(header::CONTENT_TYPE, "application/json")], text)
}

#[tokio::main]
async fn main() {
    let mut args = std::env::args().skip(1);
    let (Some(listen), Some(secret)) = (args.next(), args.next()) else {
        eprintln!("usage: floor-server <listen address> <secret>");
        std::process::exit(2);
    };
    let secret: Arc<[u8]> = Arc::from(secret.into_bytes());
    let app = Router::new()
        .route("/{*path}", post(hook))
        .with_state(secret);
    let listener = match tokio::net::TcpListener::bind(&listen).await {
        // TCP_NODELAY, as svc-controller sets it.
        Ok(listener) => listener.tap_io(|tcp| {
            let _ = tcp.set_nodelay(true);
        }),
        Err(err) => {
            eprintln!("floor-server: cannot listen on {listen}: {err}");
            std::process::exit(1);
        }
    };
    println!("floor-server listening on {listen}");
    if let Err(err) = axum::serve(listener, app).await {
        eprintln!("floor-server: {err}");
        std::process::exit(1);
    }
}
