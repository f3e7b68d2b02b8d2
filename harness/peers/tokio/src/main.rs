//! tokio-peer -- the Rust Tokio reference row: hyper 0.14 over tokio 1.24, the project's routes
//! with their bytes (docs/README.md's route spec), a task per connection on Tokio's scheduler.
//!
//!   build/bin/tokio-peer --port 8080 --threads 1      # current_thread runtime: one core
//!   curl -v localhost:8080/delay/100                   # 200 text/plain "100", after 100 ms
//!
//! /delay waits with tokio::time::sleep (a timer on the runtime's wheel: the task is parked, no
//! thread is held); /block sleeps in spawn_blocking, Tokio's own pool (--blocking-threads, 512 by
//! default: its ceiling is that pool / the delay); /cpu burns CPU on the runtime thread, as a model
//! does; /echo answers the body. --threads 1 runs the current_thread runtime, N a work-stealing one
//! of N workers. --port 0 picks a free port, --port-file FILE writes it once listening.
//! SIGTERM/SIGINT: stop accepting, finish what is in flight, exit 0.

use std::convert::Infallible;
use std::net::{SocketAddr, TcpListener};
use std::time::{Duration, Instant};

use hyper::body::HttpBody;
use hyper::header::{HeaderValue, ALLOW, CONTENT_LENGTH, CONTENT_TYPE, SERVER};
use hyper::service::{make_service_fn, service_fn};
use hyper::{Body, Method, Request, Response, StatusCode};

const MAX_DELAY_MS: u64 = 60_000;
const MAX_CPU_US: u64 = 1_000_000;
const MAX_BODY_BYTES: usize = 1 << 20;

fn reply(status: StatusCode, content_type: &'static str, body: Body) -> Response<Body> {
    let mut r = Response::new(body);
    *r.status_mut() = status;
    r.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    r.headers_mut().insert(SERVER, HeaderValue::from_static("tokio-hyper"));
    r
}

fn text(status: StatusCode, body: String) -> Response<Body> {
    reply(status, "text/plain", Body::from(body))
}

fn method_not_allowed(allow: &'static str) -> Response<Body> {
    let mut r = text(StatusCode::METHOD_NOT_ALLOWED, "method not allowed\n".into());
    r.headers_mut().insert(ALLOW, HeaderValue::from_static(allow));
    r
}

/// `{n}` of a route: decimal digits only, at most `max`; leading zeros are fine ("007" is 7).
fn bounded(digits: &str, max: u64) -> Option<u64> {
    if digits.is_empty() || digits.len() > 20 || !digits.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    digits.parse::<u64>().ok().filter(|v| *v <= max)
}

/// Tokio's timer counts whole milliseconds; a request is never answered before its time, so the
/// rest is waited out.
async fn wait(ms: u64) {
    let due = Instant::now() + Duration::from_millis(ms);
    let mut now = Instant::now();
    while now < due {
        tokio::time::sleep(due - now).await;
        now = Instant::now();
    }
}

fn thread_cpu_time() -> Duration {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes the timespec it is given, nothing else.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// `us` microseconds of this thread's CPU, as the project's models burn it.
fn burn_cpu(us: u64) {
    let end = thread_cpu_time() + Duration::from_micros(us);
    while thread_cpu_time() < end {
        std::hint::spin_loop();
    }
}

/// /delay/{ms}, /block/{ms}, /cpu/{us}: a GET (or HEAD) with a bounded number.
async fn numeric(path: &str, get: bool) -> Option<Response<Body>> {
    let routes = [("/delay/", MAX_DELAY_MS, "delay in ms"), ("/block/", MAX_DELAY_MS, "block in ms"),
                  ("/cpu/", MAX_CPU_US, "cpu in us")];
    for (prefix, max, what) in routes {
        let arg = match path.strip_prefix(prefix) {
            Some(arg) => arg,
            None => continue,
        };
        if !get {
            return Some(method_not_allowed("GET, HEAD, OPTIONS"));
        }
        let n = match bounded(arg, max) {
            Some(n) => n,
            None => {
                let why = format!("{what} must be decimal digits from 0 to {max}\n");
                return Some(text(StatusCode::BAD_REQUEST, why));
            }
        };
        match prefix {
            // [tokio-wait]
            "/delay/" => wait(n).await,
            "/block/" => {
                let slept = tokio::task::spawn_blocking(move || std::thread::sleep(Duration::from_millis(n)));
                if slept.await.is_err() {
                    return Some(text(StatusCode::SERVICE_UNAVAILABLE, "the blocking pool failed\n".into()));
                }
            }
            // [tokio-wait]
            _ => burn_cpu(n),
        }
        return Some(text(StatusCode::OK, n.to_string()));
    }
    None
}

/// POST /echo: the body back, up to 1 MiB (413 from Content-Length before the body is read).
async fn echo(req: Request<Body>) -> Response<Body> {
    let too_large = || text(StatusCode::PAYLOAD_TOO_LARGE,
                            format!("request body larger than {MAX_BODY_BYTES} bytes\n"));
    let declared = req.headers().get(CONTENT_LENGTH).and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    if declared.map_or(false, |n| n > MAX_BODY_BYTES) {
        return too_large();
    }
    let mut body = req.into_body();
    let mut got = Vec::new();
    while let Some(chunk) = body.data().await {
        match chunk {
            Ok(bytes) if got.len() + bytes.len() <= MAX_BODY_BYTES => got.extend_from_slice(&bytes),
            Ok(_) => return too_large(),
            Err(_) => return text(StatusCode::BAD_REQUEST, "the body could not be read\n".into()),
        }
    }
    reply(StatusCode::OK, "application/octet-stream", Body::from(got))
}

async fn route(req: Request<Body>) -> Result<Response<Body>, Infallible> {
    let path = req.uri().path().to_owned();
    let get = req.method() == Method::GET || req.method() == Method::HEAD;
    let answer = match path.as_str() {
        "/plaintext" if get => text(StatusCode::OK, "Hello, World!".into()),
        "/plaintext" => method_not_allowed("GET, HEAD, OPTIONS"),
        "/echo" if req.method() == Method::POST => echo(req).await,
        "/echo" => method_not_allowed("POST, OPTIONS"),
        _ => match numeric(&path, get).await {
            Some(r) => r,
            None => text(StatusCode::NOT_FOUND, "not found\n".into()),
        },
    };
    Ok(answer)
}

struct Options {
    port: u16,
    port_file: Option<String>,
    threads: usize,
    blocking_threads: usize,
}

fn options() -> Result<Options, String> {
    let mut o = Options { port: 8080, port_file: None, threads: 1, blocking_threads: 512 };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args.next().ok_or(format!("{flag} needs a value"))?;
        let number = || value.parse::<usize>().map_err(|_| format!("{flag}: not a number: {value}"));
        match flag.as_str() {
            "--port" => o.port = number()? as u16,
            "--port-file" => o.port_file = Some(value.clone()),
            "--threads" => o.threads = number()?.max(1),
            "--blocking-threads" => o.blocking_threads = number()?.max(1),
            _ => return Err(format!("unknown argument {flag} (--port, --port-file, --threads, --blocking-threads)")),
        }
    }
    Ok(o)
}

async fn stopped() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).expect("SIGTERM handler");
    let mut int = signal(SignalKind::interrupt()).expect("SIGINT handler");
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
}

async fn serve(listener: TcpListener) -> hyper::Result<()> {
    let service = make_service_fn(|_| async { Ok::<_, Infallible>(service_fn(route)) });
    hyper::Server::from_tcp(listener)?
        .http1_keepalive(true)
        .serve(service)
        .with_graceful_shutdown(stopped())
        .await
}

fn main() {
    let o = options().unwrap_or_else(|why| {
        eprintln!("tokio-peer: {why}");
        std::process::exit(2);
    });
    let mut builder = if o.threads == 1 {
        tokio::runtime::Builder::new_current_thread()
    } else {
        let mut b = tokio::runtime::Builder::new_multi_thread();
        b.worker_threads(o.threads);
        b
    };
    let runtime = builder.max_blocking_threads(o.blocking_threads).enable_all().build()
        .expect("a Tokio runtime");
    let listener = TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], o.port))).unwrap_or_else(|e| {
        eprintln!("tokio-peer: cannot listen on 127.0.0.1:{}: {e}", o.port);
        std::process::exit(1);
    });
    listener.set_nonblocking(true).expect("a non-blocking listener");
    let port = listener.local_addr().expect("a bound address").port();
    println!("tokio-peer listening on http://127.0.0.1:{port}/ (pid {}, {} runtime thread(s), \
              blocking pool {})", std::process::id(), o.threads, o.blocking_threads);
    if let Some(file) = &o.port_file {
        std::fs::write(file, format!("{port}\n")).expect("the port file");
    }
    let _guard = runtime.enter();
    if let Err(e) = runtime.block_on(serve(listener)) {
        eprintln!("tokio-peer: {e}");
        std::process::exit(1);
    }
}
