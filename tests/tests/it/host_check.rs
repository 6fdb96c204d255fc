//! A loopback listener answers only requests addressed to it (an IP literal, `localhost`
//! or a name in `allowed_hosts`): a page that rebinds its own name to 127.0.0.1 gets 421.

use svc_tests::TestService;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

/// Status code of a GET of `path` sent with `Host: host`.
async fn status_with_host(svc: &TestService, path: &str, host: &str) -> u16 {
    let mut stream = TcpStream::connect(svc.listen_address())
        .await
        .expect("connect");
    let request = format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.expect("write");
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).await.expect("read");
    let text = String::from_utf8_lossy(&answer);
    text.split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("no status line: {text}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_loopback_listener_refuses_foreign_host_names() {
    let svc = TestService::builder()
        .svc("allowed_hosts = svc.example.org")
        .start()
        .await;
    let port = svc
        .listen_address()
        .rsplit_once(':')
        .expect("port")
        .1
        .to_owned();
    for host in [
        svc.listen_address().to_owned(),
        format!("localhost:{port}"),
        format!("[::1]:{port}"),
        "svc.example.org".to_owned(),
    ] {
        assert_eq!(
            status_with_host(&svc, "/svc/api/environment", &host).await,
            200,
            "{host}"
        );
    }
    for host in [
        "rebound.example",
        "rebound.example:80",
        "svc.example.org.evil.example",
    ] {
        assert_eq!(
            status_with_host(&svc, "/svc/api/environment", host).await,
            421,
            "{host}"
        );
        assert_eq!(status_with_host(&svc, "/svc/", host).await, 421, "{host}");
    }
}
