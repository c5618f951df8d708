//! `net-probe`: what an agent inside the sandbox can reach. Each probe reports one line,
//! `<kind> <target>: ok …` or `<kind> <target>: denied (<why>)`, so a test can read the verdict
//! from the run's log and check the other side (a listener that must see nothing) on the host.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::os::unix::net::UnixStream;
use std::time::Duration;

use crate::cli::Opts;

const TIMEOUT: Duration = Duration::from_secs(5);

/// Every probe the options ask for, in order: direct TCP, CONNECT, proxied GET, unix, abstract.
pub fn probe_all(opts: &Opts) -> Vec<String> {
    let mut lines = Vec::new();
    for target in &opts.connect {
        lines.push(format!(
            "connect {target}: {}",
            verdict(tcp(target).map(|_| "ok".into()))
        ));
    }
    for target in &opts.proxy_connect {
        lines.push(format!(
            "proxy-connect {target}: {}",
            verdict(proxy_connect(target))
        ));
    }
    for url in &opts.proxy_get {
        lines.push(format!("proxy-get {url}: {}", verdict(proxy_get(url))));
    }
    for path in &opts.unix {
        lines.push(format!(
            "unix {path}: {}",
            verdict(
                UnixStream::connect(path)
                    .map(|_| "ok".into())
                    .map_err(|e| e.to_string())
            )
        ));
    }
    for name in &opts.abstract_names {
        lines.push(format!(
            "abstract {name}: {}",
            verdict(abstract_socket(name))
        ));
    }
    lines
}

fn verdict(result: Result<String, String>) -> String {
    match result {
        Ok(what) => what,
        Err(why) => format!("denied ({why})"),
    }
}

fn tcp(target: &str) -> Result<TcpStream, String> {
    let addr = target
        .to_socket_addrs()
        .map_err(|e| e.to_string())?
        .next()
        .ok_or("no address")?;
    let stream = TcpStream::connect_timeout(&addr, TIMEOUT).map_err(|e| e.to_string())?;
    stream
        .set_read_timeout(Some(TIMEOUT))
        .map_err(|e| e.to_string())?;
    Ok(stream)
}

/// `host:port` of a proxy variable (`http://127.0.0.1:3128`).
fn proxy_from(var: &str) -> Result<String, String> {
    let value = std::env::var(var).map_err(|_| format!("${var} is not set"))?;
    let rest = value.split_once("://").map_or(value.as_str(), |(_, r)| r);
    Ok(rest.trim_end_matches('/').to_string())
}

/// The status line of the reply, then the first line of its body when it has one.
fn read_reply(stream: TcpStream) -> Result<String, String> {
    let mut reader = BufReader::new(stream);
    let mut status = String::new();
    reader.read_line(&mut status).map_err(|e| e.to_string())?;
    let mut line = String::new();
    while reader.read_line(&mut line).map_err(|e| e.to_string())? > 0 {
        if line == "\r\n" {
            break;
        }
        line.clear();
    }
    Ok(status.trim_end().to_string())
}

fn proxy_connect(target: &str) -> Result<String, String> {
    let mut stream = tcp(&proxy_from("HTTPS_PROXY")?)?;
    write!(
        stream,
        "CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n"
    )
    .map_err(|e| e.to_string())?;
    let status = read_reply(stream)?;
    if status.contains(" 200 ") {
        Ok(format!("ok ({status})"))
    } else {
        Err(status)
    }
}

fn proxy_get(url: &str) -> Result<String, String> {
    let mut stream = tcp(&proxy_from("HTTP_PROXY")?)?;
    let host = url
        .split_once("://")
        .map_or(url, |(_, r)| r)
        .split('/')
        .next()
        .unwrap_or_default()
        .to_string();
    write!(stream, "GET {url} HTTP/1.1\r\nHost: {host}\r\n\r\n").map_err(|e| e.to_string())?;
    let mut reader = BufReader::new(stream);
    let mut status = String::new();
    reader.read_line(&mut status).map_err(|e| e.to_string())?;
    let mut rest = String::new();
    let _ = reader.read_to_string(&mut rest);
    let body = rest
        .split("\r\n\r\n")
        .nth(1)
        .unwrap_or_default()
        .trim()
        .to_string();
    let status = status.trim_end().to_string();
    if status.contains(" 200 ") {
        Ok(format!("ok ({status}) {body}"))
    } else {
        Err(format!("{status} {body}"))
    }
}

fn abstract_socket(name: &str) -> Result<String, String> {
    use std::os::linux::net::SocketAddrExt;
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes())
        .map_err(|e| e.to_string())?;
    UnixStream::connect_addr(&addr)
        .map(|_| "ok".to_string())
        .map_err(|e| e.to_string())
}
