//! A loopback HTTP receiver for the tests of what the controller sends out (webhook
//! notifications, health pings): it records every request (method, path and query,
//! headers, body) and answers 500 to the first `failures` of them and 200 to the rest,
//! or, started [`Sink::silent`], never answers at all (it reads the request and holds
//! the connection). One request per connection.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _, BufReader};
use tokio::net::{TcpListener, TcpStream};

use crate::{WAIT, wait_for};

/// One request the sink received.
#[derive(Debug, Clone)]
pub struct Received {
    pub method: String,
    /// Path and query, as in the request line.
    pub path: String,
    /// Header names in lower case.
    pub headers: BTreeMap<String, String>,
    pub body: Vec<u8>,
}

impl Received {
    /// The body as text.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// How the sink answers.
#[derive(Debug, Clone, Copy)]
enum Answer {
    /// 500 to the first this many requests, 200 to the rest.
    FailFirst(usize),
    /// Nothing, ever.
    Never,
}

/// The receiver; it stops when dropped.
#[derive(Debug)]
pub struct Sink {
    port: u16,
    received: Arc<Mutex<Vec<Received>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Sink {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Sink {
    /// A sink that answers 500 to the first `failures` requests, then 200.
    pub async fn start(failures: usize) -> Sink {
        Sink::with_answer(Answer::FailFirst(failures)).await
    }

    /// A sink that reads each request and never answers it.
    pub async fn silent() -> Sink {
        Sink::with_answer(Answer::Never).await
    }

    async fn with_answer(answer: Answer) -> Sink {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the sink");
        let port = listener.local_addr().expect("its address").port();
        let received = Arc::new(Mutex::new(Vec::new()));
        let served = Arc::new(AtomicUsize::new(0));
        let task = {
            let received = received.clone();
            tokio::spawn(async move {
                let mut held = tokio::task::JoinSet::new();
                while let Ok((stream, _)) = listener.accept().await {
                    let (received, served) = (received.clone(), served.clone());
                    held.spawn(async move {
                        serve(stream, &received, &served, answer).await;
                    });
                }
            })
        };
        Sink {
            port,
            received,
            task,
        }
    }

    /// `http://127.0.0.1:<port><path>`.
    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// Every request so far, in the order they were read.
    pub fn received(&self) -> Vec<Received> {
        self.received.lock().expect("the sink's list").clone()
    }

    /// Waits (at most [`WAIT`]) for `count` requests, and returns all so far.
    pub async fn wait_requests(&self, count: usize) -> Vec<Received> {
        wait_for(
            WAIT,
            &format!("{count} request(s) at the sink"),
            async || {
                let received = self.received();
                (received.len() >= count).then_some(received)
            },
        )
        .await
    }
}

/// Reads one request and answers it as `answer` says (or holds it for ever).
async fn serve(
    stream: TcpStream,
    received: &Mutex<Vec<Received>>,
    served: &AtomicUsize,
    answer: Answer,
) {
    let mut reader = BufReader::new(stream);
    let Some(request) = read_request(&mut reader).await else {
        return;
    };
    // Recorded before it is answered: once the sender has its answer, the test finds it.
    received.lock().expect("the sink's list").push(request);
    let status = match answer {
        Answer::Never => {
            // Hold the connection open until the sender gives up or the sink stops.
            let mut rest = Vec::new();
            let _ = reader.read_to_end(&mut rest).await;
            return;
        }
        Answer::FailFirst(failures) if served.fetch_add(1, Ordering::SeqCst) < failures => {
            "500 Internal Server Error"
        }
        Answer::FailFirst(_) => "200 OK",
    };
    let answer = format!("HTTP/1.1 {status}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
    let mut stream = reader.into_inner();
    if stream.write_all(answer.as_bytes()).await.is_ok() {
        let _ = stream.shutdown().await;
    }
}

/// The request line, the headers and a `Content-Length` body.
async fn read_request(reader: &mut BufReader<TcpStream>) -> Option<Received> {
    let mut request_line = String::new();
    reader.read_line(&mut request_line).await.ok()?;
    let mut words = request_line.split_whitespace();
    let method = words.next()?.to_string();
    let path = words.next()?.to_string();
    let mut headers = BTreeMap::new();
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).await.ok()?;
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        let (name, value) = line.split_once(':')?;
        headers.insert(name.trim().to_ascii_lowercase(), value.trim().to_string());
    }
    let length: usize = match headers.get("content-length") {
        Some(length) => length.parse().ok()?,
        None => 0,
    };
    let mut body = vec![0; length];
    reader.read_exact(&mut body).await.ok()?;
    Some(Received {
        method,
        path,
        headers,
        body,
    })
}
