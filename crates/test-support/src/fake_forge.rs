//! The fake forge: a loopback stand-in for GitHub's REST API that the real `gh` is pointed at,
//! as the CLIs are pointed at the fake model API.
//!
//! How `gh` (2.23, Debian's) reaches it without TLS: `GH_HOST=github.localhost` is gh's own
//! development host, which it speaks to over plain `http://api.github.localhost/` (every other
//! host but github.com is an enterprise host over https); `HTTP_PROXY` names this server, so gh
//! sends each request here in proxy form (`GET http://api.github.localhost/repos/...`), and no
//! name has to resolve. `GH_TOKEN` is the login and `GH_CONFIG_DIR` an empty directory, so the
//! user's own gh configuration is never read. [`FakeForge::gh_env`] gives all four.
//!
//! It serves what Corral's forge asks for: a repository (`GET /repos/O/R`), its open pull
//! requests by head branch (`GET /repos/O/R/pulls?head=O:BRANCH`), opening one (`POST`, a 422
//! as GitHub's when the head has one open already), editing one (`PATCH /repos/O/R/pulls/N`)
//! and the issue search (`GET /search/issues?q=repo:O/R is:issue label:X words`). A request
//! without the token gets GitHub's 401; [`FakeForge::fail_with`] answers everything with a
//! status (a 500). Every request is recorded ([`FakeForge::requests`]).

use std::convert::Infallible;
use std::io;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::oneshot;

/// The host `gh` is told the forge is at (see the module documentation).
pub const FAKE_GH_HOST: &str = "github.localhost";

/// One request the fake forge was asked.
#[derive(Debug, Clone, PartialEq)]
pub struct ForgeRequest {
    /// `GET`, `POST`, `PATCH`.
    pub method: String,
    /// The path (`/repos/octo/widgets/pulls`).
    pub path: String,
    /// The query, decoded, in order.
    pub query: Vec<(String, String)>,
    /// The JSON body, when there was one.
    pub body: Option<Value>,
    /// Whether it carried the token.
    pub authorized: bool,
}

/// A pull request the fake forge holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FakePullRequest {
    /// Its number.
    pub number: u64,
    /// Its head branch.
    pub head: String,
    /// Its base branch.
    pub base: String,
    /// Its title.
    pub title: String,
    /// Its body.
    pub body: String,
}

/// An issue the fake forge holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FakeIssue {
    /// Its number.
    pub number: u64,
    /// Its title.
    pub title: String,
    /// Its body.
    pub body: String,
    /// Its labels.
    pub labels: Vec<String>,
}

#[derive(Debug, Default)]
struct State {
    repo: String,
    token: String,
    fail: Option<u16>,
    pulls: Vec<FakePullRequest>,
    issues: Vec<FakeIssue>,
    log: Vec<ForgeRequest>,
}

/// The running fake forge; dropped, it stops.
#[derive(Debug)]
pub struct FakeForge {
    addr: std::net::SocketAddr,
    state: Arc<Mutex<State>>,
    shutdown: Option<oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    state.lock().unwrap_or_else(PoisonError::into_inner)
}

impl FakeForge {
    /// Starts a forge holding the repository `repo` (`OWNER/REPO`) on `127.0.0.1`, accepting
    /// `token`.
    pub fn start(repo: &str, token: &str) -> io::Result<Self> {
        let std_listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        std_listener.set_nonblocking(true)?;
        let addr = std_listener.local_addr()?;
        let state = Arc::new(Mutex::new(State {
            repo: repo.to_owned(),
            token: token.to_owned(),
            ..State::default()
        }));
        let (shutdown_tx, mut shutdown_rx) = oneshot::channel::<()>();
        let served = Arc::clone(&state);
        let thread = std::thread::Builder::new()
            .name(format!("fake-forge-{}", addr.port()))
            .spawn(move || {
                let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                else {
                    return;
                };
                runtime.block_on(async move {
                    let Ok(listener) = TcpListener::from_std(std_listener) else {
                        return;
                    };
                    loop {
                        tokio::select! {
                            _ = &mut shutdown_rx => return,
                            accepted = listener.accept() => if let Ok((stream, _)) = accepted {
                                let state = Arc::clone(&served);
                                tokio::spawn(async move {
                                    let service = service_fn(move |request| {
                                        handle(Arc::clone(&state), request)
                                    });
                                    let _ = http1::Builder::new()
                                        .serve_connection(TokioIo::new(stream), service)
                                        .await;
                                });
                            },
                        }
                    }
                });
            })?;
        Ok(FakeForge {
            addr,
            state,
            shutdown: Some(shutdown_tx),
            thread: Some(thread),
        })
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The repository as `gh` names it here: `github.localhost/OWNER/REPO`.
    pub fn repo(&self) -> String {
        format!("{FAKE_GH_HOST}/{}", lock(&self.state).repo)
    }

    /// The variables that point the real `gh` here, with `config_dir` (an empty directory) as
    /// its configuration and `token` as its login (`None`: not logged in).
    pub fn gh_env(
        &self,
        config_dir: &std::path::Path,
        token: Option<&str>,
    ) -> Vec<(String, String)> {
        let mut env = vec![
            ("GH_HOST".to_owned(), FAKE_GH_HOST.to_owned()),
            ("HTTP_PROXY".to_owned(), self.url()),
            ("GH_CONFIG_DIR".to_owned(), config_dir.display().to_string()),
        ];
        if let Some(token) = token {
            env.push(("GH_TOKEN".to_owned(), token.to_owned()));
        }
        env
    }

    /// Adds an open issue.
    pub fn add_issue(&self, number: u64, title: &str, body: &str, labels: &[&str]) {
        lock(&self.state).issues.push(FakeIssue {
            number,
            title: title.to_owned(),
            body: body.to_owned(),
            labels: labels.iter().map(|l| (*l).to_owned()).collect(),
        });
    }

    /// From now on, answers every request with `status` (GitHub's error body).
    pub fn fail_with(&self, status: u16) {
        lock(&self.state).fail = Some(status);
    }

    /// Every request so far.
    pub fn requests(&self) -> Vec<ForgeRequest> {
        lock(&self.state).log.clone()
    }

    /// The pull requests it holds, oldest first.
    pub fn pull_requests(&self) -> Vec<FakePullRequest> {
        lock(&self.state).pulls.clone()
    }
}

impl Drop for FakeForge {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

type Answer = Response<Full<Bytes>>;

fn answer(status: u16, body: &Value) -> Answer {
    let mut response = Response::new(Full::new(Bytes::from(body.to_string())));
    *response.status_mut() =
        StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json; charset=utf-8"),
    );
    response
}

fn decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' => match text.get(i + 1..i + 3).map(|h| u8::from_str_radix(h, 16)) {
                Some(Ok(b)) => {
                    out.push(b);
                    i += 2;
                }
                Some(Err(_)) | None => out.push(b'%'),
            },
            other => out.push(other),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn query_pairs(query: Option<&str>) -> Vec<(String, String)> {
    query
        .unwrap_or("")
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|pair| match pair.split_once('=') {
            Some((k, v)) => (decode(k), decode(v)),
            None => (decode(pair), String::new()),
        })
        .collect()
}

async fn handle(
    state: Arc<Mutex<State>>,
    request: Request<Incoming>,
) -> Result<Answer, Infallible> {
    let method = request.method().clone();
    let path = request.uri().path().to_owned();
    let query = query_pairs(request.uri().query());
    let authorization = request
        .headers()
        .get(hyper::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let bytes = request
        .into_body()
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    let body: Option<Value> = serde_json::from_slice(&bytes).ok();
    let mut state = lock(&state);
    let authorized = authorization.as_deref() == Some(&format!("token {}", state.token));
    state.log.push(ForgeRequest {
        method: method.to_string(),
        path: path.clone(),
        query: query.clone(),
        body: body.clone(),
        authorized,
    });
    if let Some(status) = state.fail {
        return Ok(answer(status, &json!({ "message": "Server Error" })));
    }
    if !authorized {
        return Ok(answer(
            401,
            &json!({ "message": "Requires authentication", "documentation_url": "https://docs.github.com/rest" }),
        ));
    }
    let repo_path = format!("/repos/{}", state.repo);
    let owner = state.repo.split('/').next().unwrap_or("").to_owned();
    let get = |key: &str| query.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone());
    let html = |n: u64, kind: &str, repo: &str| format!("https://{FAKE_GH_HOST}/{repo}/{kind}/{n}");
    let repo = state.repo.clone();
    let pr_json = |pr: &FakePullRequest| {
        json!({
            "number": pr.number, "html_url": html(pr.number, "pull", &repo), "state": "open",
            "title": pr.title, "body": pr.body,
            "head": { "ref": pr.head }, "base": { "ref": pr.base },
        })
    };
    let reply = if method == Method::GET && path == repo_path {
        answer(
            200,
            &json!({ "full_name": state.repo, "default_branch": "main" }),
        )
    } else if method == Method::GET && path == format!("{repo_path}/pulls") {
        let head = get("head");
        let list: Vec<Value> = state
            .pulls
            .iter()
            .filter(|pr| {
                head.as_deref()
                    .is_none_or(|h| *h == format!("{owner}:{}", pr.head))
            })
            .map(pr_json)
            .collect();
        answer(200, &Value::Array(list))
    } else if method == Method::POST && path == format!("{repo_path}/pulls") {
        let field = |key: &str| {
            body.as_ref()
                .and_then(|b| b.get(key))
                .and_then(Value::as_str)
                .map(str::to_owned)
        };
        match (field("head"), field("base"), field("title")) {
            (Some(head), Some(base), Some(title)) => {
                if state.pulls.iter().any(|pr| pr.head == head) {
                    answer(
                        422,
                        &json!({ "message": "Validation Failed", "errors": [
                            { "resource": "PullRequest", "code": "custom",
                              "message": format!("A pull request already exists for {owner}:{head}.") }
                        ]}),
                    )
                } else {
                    let pr = FakePullRequest {
                        number: state.pulls.len() as u64 + state.issues.len() as u64 + 1,
                        head,
                        base,
                        title,
                        body: field("body").unwrap_or_default(),
                    };
                    let json = pr_json(&pr);
                    state.pulls.push(pr);
                    answer(201, &json)
                }
            }
            _ => answer(422, &json!({ "message": "Validation Failed" })),
        }
    } else if method == Method::PATCH
        && let Some(number) = path
            .strip_prefix(&format!("{repo_path}/pulls/"))
            .and_then(|n| n.parse::<u64>().ok())
    {
        match state.pulls.iter_mut().find(|pr| pr.number == number) {
            Some(pr) => {
                if let Some(title) = body
                    .as_ref()
                    .and_then(|b| b.get("title"))
                    .and_then(Value::as_str)
                {
                    pr.title = title.to_owned();
                }
                if let Some(text) = body
                    .as_ref()
                    .and_then(|b| b.get("body"))
                    .and_then(Value::as_str)
                {
                    pr.body = text.to_owned();
                }
                let pr = pr.clone();
                answer(200, &pr_json(&pr))
            }
            None => answer(404, &json!({ "message": "Not Found" })),
        }
    } else if method == Method::GET && path == "/search/issues" {
        search(&state, &get("q").unwrap_or_default())
    } else {
        answer(404, &json!({ "message": "Not Found" }))
    };
    Ok(reply)
}

/// The issue search: `repo:`, `label:` and words (in the title or body); `is:` terms are what
/// every issue here is.
fn search(state: &State, q: &str) -> Answer {
    let mut labels = Vec::new();
    let mut words = Vec::new();
    let mut right_repo = true;
    for term in q.split_whitespace() {
        if let Some(r) = term.strip_prefix("repo:") {
            right_repo &= r == state.repo;
        } else if let Some(l) = term.strip_prefix("label:") {
            labels.push(l.trim_matches('"').to_owned());
        } else if !term.starts_with("is:") {
            words.push(term.to_lowercase());
        }
    }
    let items: Vec<Value> = state
        .issues
        .iter()
        .filter(|_| right_repo)
        .filter(|i| labels.iter().all(|l| i.labels.contains(l)))
        .filter(|i| {
            let text = format!("{} {}", i.title, i.body).to_lowercase();
            words.iter().all(|w| text.contains(w.as_str()))
        })
        .map(|i| {
            json!({
                "number": i.number, "title": i.title, "body": i.body,
                "html_url": format!("https://{FAKE_GH_HOST}/{}/issues/{}", state.repo, i.number), "state": "open",
                "labels": i.labels.iter().map(|l| json!({ "name": l })).collect::<Vec<_>>(),
            })
        })
        .collect();
    answer(
        200,
        &json!({ "total_count": items.len(), "incomplete_results": false, "items": items }),
    )
}

#[cfg(test)]
mod tests {
    use super::decode;

    #[test]
    fn queries_are_decoded() {
        assert_eq!(decode("repo%3Aoct%2Fw+is%3Aissue"), "repo:oct/w is:issue");
        assert_eq!(decode("100%"), "100%");
    }
}
