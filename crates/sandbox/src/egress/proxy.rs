//! The egress proxy: HTTP `CONNECT` tunnels and plain-HTTP forwarding to the allow-listed
//! `host:port` pairs, nothing else.
//!
//! It is served by the supervisor, on a socket that lives in the sandbox's network namespace
//! (see `netns.rs`), and connects out from the host's. Each connection's first request decides
//! where it goes; a plain-HTTP request is forwarded with `Connection: close`, so a client that
//! would reuse the connection for another host has to open a new one (and is checked again).
//! A refused or failed connection is answered with a plain-text 403 or 502 that names the
//! target, and reported to the run's execution log.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc::UnboundedSender;
use tokio::task::JoinSet;

use super::rules::{AllowList, Decision, split_authority};

/// The most a request head may take.
const MAX_HEAD: usize = 64 * 1024;
/// How long a client may take to send its request head.
const HEAD_TIMEOUT: Duration = Duration::from_secs(60);
/// How long connecting to an allowed target may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
/// Each direction's copy buffer. A streamed reply arrives as many small writes; what has piled
/// up in the socket while the proxy was busy goes on in one read and one write, as large as the
/// CLI would have read it straight from the socket (Node reads 64 KiB at a time), instead of in
/// 8 KiB pieces that each cost the CLI's event loop a turn.
const COPY_BUFFER: usize = 64 * 1024;

/// Something the proxy did that the run's log must show.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EgressNote {
    /// A connection the allow-list does not permit.
    Refused {
        /// `CONNECT` or the plain-HTTP method.
        method: String,
        /// `host:port` as the client asked for it.
        target: String,
        /// Why.
        reason: String,
    },
    /// An allowed target could not be reached.
    Failed {
        /// `host:port`.
        target: String,
        /// The operating system's words.
        error: String,
    },
}

/// Serves `listener` until the returned future is dropped (which also ends every tunnel).
pub async fn serve(
    listener: TcpListener,
    allow: Arc<AllowList>,
    notes: UnboundedSender<EgressNote>,
) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    connections.spawn(handle(stream, Arc::clone(&allow), notes.clone()));
                }
                Err(e) => {
                    // Out of descriptors, most likely: let some connections end first.
                    tracing::warn!(error = %e, "egress proxy: accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}

/// A parsed first request.
#[derive(Debug, PartialEq, Eq)]
struct Request {
    method: String,
    host: String,
    port: u16,
    /// For plain HTTP: the head to send upstream (origin-form, `Connection: close`).
    forward_head: Option<Vec<u8>>,
}

impl Request {
    fn target(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

/// Headers that belong to the hop between the client and the proxy.
const HOP_HEADERS: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authorization",
    "proxy-authenticate",
];

/// Parses a request head (through its blank line). `Err` is the reason for a 400.
fn parse_head(head: &[u8]) -> Result<Request, &'static str> {
    let text = std::str::from_utf8(head).map_err(|_| "the request head is not UTF-8")?;
    let mut lines = text.split("\r\n");
    let request_line = lines.next().unwrap_or_default();
    let mut parts = request_line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err("malformed request line");
    };
    if !version.starts_with("HTTP/1.") {
        return Err("only HTTP/1.x requests are proxied");
    }
    if method.eq_ignore_ascii_case("CONNECT") {
        let (host, port) = split_authority(target).ok_or("CONNECT needs host:port")?;
        return Ok(Request {
            method: "CONNECT".to_string(),
            host,
            port,
            forward_head: None,
        });
    }
    let scheme_end = target.find("://").ok_or(
        "this is Corral's egress proxy: send absolute-form requests (http://host/...) or CONNECT",
    )?;
    if !target[..scheme_end].eq_ignore_ascii_case("http") {
        return Err("only http:// is forwarded; use CONNECT for anything else");
    }
    let rest = &target[scheme_end + 3..];
    let split = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, path) = rest.split_at(split);
    if authority.contains('@') {
        return Err("credentials in the request target are not forwarded");
    }
    let with_port = if authority.ends_with(']') || !authority.contains(':') {
        format!("{authority}:80")
    } else {
        authority.to_string()
    };
    let (host, port) = split_authority(&with_port).ok_or("bad host in the request target")?;
    let path = match path {
        "" => "/".to_string(),
        p if p.starts_with('?') => format!("/{p}"),
        p => p.to_string(),
    };
    let mut out = format!("{method} {path} {version}\r\n");
    let mut has_host = false;
    for line in lines.take_while(|l| !l.is_empty()) {
        let name = line.split(':').next().unwrap_or_default().trim();
        if HOP_HEADERS.iter().any(|h| name.eq_ignore_ascii_case(h)) {
            continue;
        }
        has_host |= name.eq_ignore_ascii_case("host");
        out.push_str(line);
        out.push_str("\r\n");
    }
    if !has_host {
        out.push_str(&format!("Host: {authority}\r\n"));
    }
    out.push_str("Connection: close\r\n\r\n");
    Ok(Request {
        method: method.to_string(),
        host,
        port,
        forward_head: Some(out.into_bytes()),
    })
}

/// Reads up to and including the blank line; returns the head and what came after it.
async fn read_head(stream: &mut TcpStream) -> io::Result<Option<(Vec<u8>, Vec<u8>)>> {
    let mut buf = Vec::with_capacity(2048);
    let mut chunk = [0u8; 4096];
    loop {
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Ok(None);
        }
        let searched_from = buf.len().saturating_sub(3);
        buf.extend_from_slice(&chunk[..n]);
        if let Some(at) = memchr::memmem::find(&buf[searched_from..], b"\r\n\r\n") {
            let end = searched_from + at + 4;
            let rest = buf.split_off(end);
            return Ok(Some((buf, rest)));
        }
        if buf.len() > MAX_HEAD {
            return Err(io::Error::other("request head over 64 KiB"));
        }
    }
}

async fn respond(stream: &mut TcpStream, status: &str, body: &str) {
    let text = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.write_all(text.as_bytes()).await;
    let _ = stream.shutdown().await;
}

/// Why connecting failed.
enum ConnectError {
    /// The name resolves to the host itself (loopback, unspecified or link-local) and the rule
    /// did not name the host.
    ResolvesToHost(IpAddr),
    /// Resolving or connecting failed.
    Io(io::Error),
}

/// Addresses a name may not lead to unless the rule names them: the host itself, and the
/// link-local range where cloud metadata services answer.
fn is_host_or_link_local(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_loopback() || v4.is_unspecified() || v4.is_link_local(),
        IpAddr::V6(v6) => {
            v6.is_loopback()
                || v6.is_unspecified()
                || (v6.segments()[0] & 0xffc0) == 0xfe80
                || v6
                    .to_ipv4_mapped()
                    .is_some_and(|v4| v4.is_loopback() || v4.is_unspecified() || v4.is_link_local())
        }
    }
}

async fn connect(host: &str, port: u16, may_reach_host: bool) -> Result<TcpStream, ConnectError> {
    let addrs: Vec<SocketAddr> = match host.parse::<IpAddr>() {
        Ok(ip) => vec![SocketAddr::new(ip, port)],
        Err(_) => tokio::net::lookup_host((host, port))
            .await
            .map_err(ConnectError::Io)?
            .collect(),
    };
    let mut usable = addrs
        .iter()
        .copied()
        .filter(|a| may_reach_host || !is_host_or_link_local(a.ip()))
        .peekable();
    if usable.peek().is_none() {
        return Err(match addrs.first() {
            Some(a) => ConnectError::ResolvesToHost(a.ip()),
            None => ConnectError::Io(io::Error::other("the name resolves to no address")),
        });
    }
    let mut last = io::Error::other("no address");
    for addr in usable {
        match tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(addr)).await {
            Ok(Ok(stream)) => return Ok(stream),
            Ok(Err(e)) => last = e,
            Err(_) => last = io::Error::new(io::ErrorKind::TimedOut, "connect timed out"),
        }
    }
    Err(ConnectError::Io(last))
}

async fn handle(mut client: TcpStream, allow: Arc<AllowList>, notes: UnboundedSender<EgressNote>) {
    // Streamed replies are many small writes: no Nagle delay on either leg.
    let _ = client.set_nodelay(true);
    let (head, rest) = match tokio::time::timeout(HEAD_TIMEOUT, read_head(&mut client)).await {
        Ok(Ok(Some(parts))) => parts,
        Ok(Ok(None)) | Ok(Err(_)) | Err(_) => return,
    };
    let request = match parse_head(&head) {
        Ok(request) => request,
        Err(why) => {
            respond(&mut client, "400 Bad Request", &format!("corral: {why}\n")).await;
            return;
        }
    };
    let target = request.target();
    let refuse = |reason: String| EgressNote::Refused {
        method: request.method.clone(),
        target: target.clone(),
        reason,
    };
    let rule = match allow.decide(&request.host, request.port) {
        Decision::Allowed(rule) => rule.clone(),
        Decision::NotListed => {
            let note = refuse("not on the allow-list".to_string());
            tracing::info!(to = %target, "egress refused: not on the allow-list");
            let _ = notes.send(note);
            let body = format!(
                "corral: egress to {target} refused: it is not on this run's allow-list (the provider's endpoints and sandbox.network_allow)\n"
            );
            respond(&mut client, "403 Forbidden", &body).await;
            return;
        }
    };
    let mut upstream = match connect(&request.host, request.port, rule.names_the_host()).await {
        Ok(stream) => stream,
        Err(ConnectError::ResolvesToHost(ip)) => {
            let reason = format!(
                "{} resolves to {ip}, the host itself or link-local",
                request.host
            );
            let _ = notes.send(refuse(reason.clone()));
            respond(
                &mut client,
                "403 Forbidden",
                &format!("corral: egress to {target} refused: {reason}\n"),
            )
            .await;
            return;
        }
        Err(ConnectError::Io(e)) => {
            let _ = notes.send(EgressNote::Failed {
                target: target.clone(),
                error: e.to_string(),
            });
            respond(
                &mut client,
                "502 Bad Gateway",
                &format!("corral: cannot reach {target}: {e}\n"),
            )
            .await;
            return;
        }
    };
    let _ = upstream.set_nodelay(true);
    let started = match &request.forward_head {
        None => {
            client
                .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
                .await
        }
        Some(forward) => upstream.write_all(forward).await,
    };
    if started.is_err() || upstream.write_all(&rest).await.is_err() {
        return;
    }
    let _ = tokio::io::copy_bidirectional_with_sizes(
        &mut client,
        &mut upstream,
        COPY_BUFFER,
        COPY_BUFFER,
    )
    .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(text: &str) -> Vec<u8> {
        text.replace('\n', "\r\n").into_bytes()
    }

    #[test]
    fn connect_names_its_target() {
        let r = parse_head(&head("CONNECT api.anthropic.com:443 HTTP/1.1\nHost: x\n\n")).unwrap();
        assert_eq!(
            (r.method.as_str(), r.host.as_str(), r.port, r.forward_head),
            ("CONNECT", "api.anthropic.com", 443, None)
        );
        let r = parse_head(&head("CONNECT [::1]:8080 HTTP/1.1\n\n")).unwrap();
        assert_eq!(r.target(), "[::1]:8080");
        assert!(parse_head(&head("CONNECT api.anthropic.com HTTP/1.1\n\n")).is_err());
    }

    #[test]
    fn plain_http_is_rewritten_to_origin_form_and_closed_after_one_response() {
        let r = parse_head(&head(
            "POST http://127.0.0.1:4000/v1/chat?x=1 HTTP/1.1\nHost: 127.0.0.1:4000\nProxy-Connection: keep-alive\nConnection: keep-alive\nProxy-Authorization: Basic eA==\nContent-Length: 2\n\n",
        ))
        .unwrap();
        assert_eq!((r.host.as_str(), r.port), ("127.0.0.1", 4000));
        assert_eq!(
            String::from_utf8(r.forward_head.unwrap()).unwrap(),
            "POST /v1/chat?x=1 HTTP/1.1\r\nHost: 127.0.0.1:4000\r\nContent-Length: 2\r\nConnection: close\r\n\r\n"
        );
        let r = parse_head(&head("GET http://example.com HTTP/1.0\n\n")).unwrap();
        assert_eq!(
            String::from_utf8(r.forward_head.unwrap()).unwrap(),
            "GET / HTTP/1.0\r\nHost: example.com\r\nConnection: close\r\n\r\n"
        );
        assert_eq!(r.port, 80);
    }

    #[test]
    fn requests_the_proxy_cannot_forward_get_a_reason() {
        for (text, why) in [
            ("GET /v1/models HTTP/1.1\n\n", "absolute-form"),
            ("GET https://example.com/ HTTP/1.1\n\n", "only http://"),
            ("GET http://u:p@example.com/ HTTP/1.1\n\n", "credentials"),
            ("GET http://example.com/ HTTP/2\n\n", "HTTP/1.x"),
            ("GARBAGE\n\n", "malformed"),
        ] {
            let err = parse_head(&head(text)).unwrap_err();
            assert!(err.contains(why), "{text:?}: {err}");
        }
    }

    #[test]
    fn the_host_and_link_local_addresses_are_recognised() {
        for ip in [
            "127.0.0.1",
            "127.9.9.9",
            "0.0.0.0",
            "::1",
            "::",
            "169.254.169.254",
            "fe80::1",
            "::ffff:127.0.0.1",
        ] {
            assert!(is_host_or_link_local(ip.parse().unwrap()), "{ip}");
        }
        for ip in ["10.0.0.1", "93.184.216.34", "2606:4700::1"] {
            assert!(!is_host_or_link_local(ip.parse().unwrap()), "{ip}");
        }
    }
}
