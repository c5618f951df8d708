//! A client of Ray's Jobs HTTP API (the dashboard's `/api/jobs/`): submit a job, read its
//! status and logs, stop it. Plain HTTP/1 (a cluster's dashboard on a reachable address; in
//! tests 127.0.0.1), one connection pool per client.

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Method, Request, StatusCode};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde::{Deserialize, Serialize};

/// How long one request to the Jobs API may take (a submit waits for the job's supervisor
/// actor to be created, which is the slowest).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// Why a request to the Jobs API failed.
#[derive(Debug, thiserror::Error)]
pub enum JobsError {
    /// The address is not an `http://host:port` URL. Retryable: no, not until the setting is
    /// fixed.
    #[error("the Ray address `{address}` is not an http:// URL: {reason}")]
    Address {
        /// The address as given.
        address: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The cluster did not answer (connection refused, reset, timed out). Retryable: yes,
    /// once the cluster is up again.
    #[error("the Ray Jobs API at {address} did not answer {method} {path}: {reason}")]
    Unreachable {
        /// The cluster's address.
        address: String,
        /// The request's method.
        method: &'static str,
        /// The request's path.
        path: String,
        /// What the transport said.
        reason: String,
    },
    /// The API answered with an error status. Retryable: yes for a server error (5xx, the
    /// cluster is busy or restarting), no for a client error (4xx: no such job, a bad
    /// submission).
    #[error("the Ray Jobs API answered {method} {path} with {status}: {body}")]
    Status {
        /// The request's method.
        method: &'static str,
        /// The request's path.
        path: String,
        /// The HTTP status.
        status: u16,
        /// The body's last 2048 characters.
        body: String,
    },
    /// A job with this submission id exists already on the cluster (Ray answers 500 with this
    /// in its words). Retryable: no, not with the same id.
    #[error("a job with submission id {submission_id} exists already on the cluster")]
    Taken {
        /// The id.
        submission_id: String,
    },
    /// The API's answer was not the JSON expected. Retryable: no (a Ray version this client
    /// does not speak).
    #[error("the Ray Jobs API's answer to {path} is not what was expected: {reason}")]
    Decode {
        /// The request's path.
        path: String,
        /// What serde said.
        reason: String,
    },
}

impl JobsError {
    /// Whether the same request may succeed later.
    pub fn is_retryable(&self) -> bool {
        match self {
            JobsError::Unreachable { .. } => true,
            JobsError::Status { status, .. } => *status >= 500,
            JobsError::Address { .. } | JobsError::Taken { .. } | JobsError::Decode { .. } => false,
        }
    }
}

/// A job to submit.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JobSubmission {
    /// The shell command the job runs.
    pub entrypoint: String,
    /// The job's id, unique on the cluster (a resubmission takes a new one).
    pub submission_id: String,
    /// CPUs reserved for the entrypoint.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub entrypoint_num_cpus: Option<f64>,
    /// Memory reserved for the entrypoint, in bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub entrypoint_memory: Option<u64>,
    /// The entrypoint's runtime environment.
    pub runtime_env: RuntimeEnv,
    /// Free-form labels shown by the dashboard.
    pub metadata: BTreeMap<String, String>,
}

/// The part of Ray's runtime environment a job of Corral sets.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct RuntimeEnv {
    /// Environment variables of the entrypoint.
    pub env_vars: BTreeMap<String, String>,
}

/// A job's status, as Ray names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum JobStatus {
    /// Waiting for resources or its supervisor.
    Pending,
    /// The entrypoint runs.
    Running,
    /// Stopped by a request (ours or someone else's).
    Stopped,
    /// The entrypoint exited 0.
    Succeeded,
    /// The entrypoint exited non-zero, or the job's supervisor died (its node lost).
    Failed,
}

impl JobStatus {
    /// Whether the job will not change any more.
    pub fn is_terminal(self) -> bool {
        match self {
            JobStatus::Stopped | JobStatus::Succeeded | JobStatus::Failed => true,
            JobStatus::Pending | JobStatus::Running => false,
        }
    }
}

/// What `GET /api/jobs/<id>` says of a job (the fields Corral reads).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct JobInfo {
    /// The status.
    pub status: JobStatus,
    /// Ray's words on the status (`Job finished successfully.`, the exit code).
    #[serde(default)]
    pub message: Option<String>,
    /// Why it failed, as Ray classes it (`JOB_ENTRYPOINT_COMMAND_ERROR` when the entrypoint
    /// exited non-zero; other values when Ray lost the job).
    #[serde(default)]
    pub error_type: Option<String>,
    /// The exit code of the entrypoint, when Ray reports it.
    #[serde(default)]
    pub driver_exit_code: Option<i32>,
}

impl JobInfo {
    /// Whether the entrypoint itself ran and exited non-zero (rather than Ray losing it).
    pub fn entrypoint_failed(&self) -> bool {
        self.status == JobStatus::Failed
            && self.error_type.as_deref() == Some("JOB_ENTRYPOINT_COMMAND_ERROR")
    }
}

/// One job of `GET /api/jobs/` (the fields Corral reads).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct ListedJob {
    /// Its submission id (`None` for a driver started outside the Jobs API).
    #[serde(default)]
    pub submission_id: Option<String>,
    /// Its status.
    pub status: JobStatus,
    /// Its labels.
    #[serde(default)]
    pub metadata: Option<BTreeMap<String, String>>,
}

#[derive(Deserialize)]
struct Submitted {
    submission_id: String,
}

#[derive(Deserialize)]
struct Logs {
    logs: String,
}

#[derive(Deserialize)]
struct Stopped {
    stopped: bool,
}

/// A client of one cluster's Jobs API.
#[derive(Debug, Clone)]
pub struct JobsClient {
    address: String,
    http: Client<HttpConnector, Full<Bytes>>,
}

impl JobsClient {
    /// A client of the cluster whose dashboard is at `address` (`http://host:port`).
    ///
    /// # Errors
    /// [`JobsError::Address`] when `address` is not an `http://` URL with a host.
    pub fn new(address: &str) -> Result<Self, JobsError> {
        let trimmed = address.trim_end_matches('/');
        let uri: hyper::Uri =
            trimmed
                .parse()
                .map_err(|e: hyper::http::uri::InvalidUri| JobsError::Address {
                    address: address.to_owned(),
                    reason: e.to_string(),
                })?;
        if uri.scheme_str() != Some("http") || uri.host().is_none() {
            return Err(JobsError::Address {
                address: address.to_owned(),
                reason: "expected http://host:port (the dashboard's address)".to_owned(),
            });
        }
        let http = Client::builder(TokioExecutor::new()).build_http();
        Ok(Self {
            address: trimmed.to_owned(),
            http,
        })
    }

    /// The cluster's address.
    pub fn address(&self) -> &str {
        &self.address
    }

    /// The Ray version the cluster runs (`GET /api/version`): a check that it answers.
    ///
    /// # Errors
    /// As [`JobsError`] says.
    pub async fn version(&self) -> Result<String, JobsError> {
        #[derive(Deserialize)]
        struct Version {
            ray_version: String,
        }
        let path = "/api/version".to_owned();
        let body = self.request(Method::GET, &path, None).await?;
        decode::<Version>(&path, &body).map(|v| v.ray_version)
    }

    /// Submits `job`; its submission id as the cluster took it.
    ///
    /// # Errors
    /// As [`JobsError`] says ([`JobsError::Taken`] for a submission id in use).
    pub async fn submit(&self, job: &JobSubmission) -> Result<String, JobsError> {
        let path = "/api/jobs/".to_owned();
        let body = serde_json::to_vec(job).map_err(|e| JobsError::Decode {
            path: path.clone(),
            reason: e.to_string(),
        })?;
        let answer = match self.request(Method::POST, &path, Some(body)).await {
            Err(JobsError::Status { body, .. }) if body.contains("already exists") => {
                return Err(JobsError::Taken {
                    submission_id: job.submission_id.clone(),
                });
            }
            answer => answer?,
        };
        decode::<Submitted>(&path, &answer).map(|s| s.submission_id)
    }

    /// The job's status.
    ///
    /// # Errors
    /// As [`JobsError`] says (an unknown job is a 404 [`JobsError::Status`]).
    pub async fn status(&self, submission_id: &str) -> Result<JobInfo, JobsError> {
        let path = format!("/api/jobs/{submission_id}");
        let body = self.request(Method::GET, &path, None).await?;
        decode(&path, &body)
    }

    /// The job's whole log so far (its entrypoint's stdout and stderr).
    ///
    /// # Errors
    /// As [`JobsError`] says.
    pub async fn logs(&self, submission_id: &str) -> Result<String, JobsError> {
        let path = format!("/api/jobs/{submission_id}/logs");
        let body = self.request(Method::GET, &path, None).await?;
        decode::<Logs>(&path, &body).map(|l| l.logs)
    }

    /// Every job the cluster knows, ended ones too.
    ///
    /// # Errors
    /// As [`JobsError`] says.
    pub async fn list(&self) -> Result<Vec<ListedJob>, JobsError> {
        let path = "/api/jobs/".to_owned();
        let body = self.request(Method::GET, &path, None).await?;
        decode(&path, &body)
    }

    /// Asks the cluster to stop the job; whether it was still running to be stopped.
    ///
    /// # Errors
    /// As [`JobsError`] says.
    pub async fn stop(&self, submission_id: &str) -> Result<bool, JobsError> {
        let path = format!("/api/jobs/{submission_id}/stop");
        let body = self.request(Method::POST, &path, None).await?;
        decode::<Stopped>(&path, &body).map(|s| s.stopped)
    }

    async fn request(
        &self,
        method: Method,
        path: &str,
        body: Option<Vec<u8>>,
    ) -> Result<Bytes, JobsError> {
        let method_name = method_name(&method);
        let unreachable = |reason: String| JobsError::Unreachable {
            address: self.address.clone(),
            method: method_name,
            path: path.to_owned(),
            reason,
        };
        let mut builder = Request::builder()
            .method(method)
            .uri(format!("{}{path}", self.address));
        if body.is_some() {
            builder = builder.header(hyper::header::CONTENT_TYPE, "application/json");
        }
        let request = builder
            .body(Full::new(Bytes::from(body.unwrap_or_default())))
            .map_err(|e| JobsError::Address {
                address: self.address.clone(),
                reason: e.to_string(),
            })?;
        let exchange = async {
            let response = self
                .http
                .request(request)
                .await
                .map_err(|e| unreachable(format!("{e:?}")))?;
            let status = response.status();
            let bytes = response
                .into_body()
                .collect()
                .await
                .map_err(|e| unreachable(e.to_string()))?
                .to_bytes();
            Ok::<_, JobsError>((status, bytes))
        };
        let (status, bytes) = tokio::time::timeout(REQUEST_TIMEOUT, exchange)
            .await
            .map_err(|_| {
                unreachable(format!("no answer within {}s", REQUEST_TIMEOUT.as_secs()))
            })??;
        if status != StatusCode::OK {
            let text = String::from_utf8_lossy(&bytes);
            return Err(JobsError::Status {
                method: method_name,
                path: path.to_owned(),
                status: status.as_u16(),
                // The end of a Python traceback says what went wrong.
                body: last_chars(&text, 2048),
            });
        }
        Ok(bytes)
    }
}

fn method_name(method: &Method) -> &'static str {
    if method == Method::POST {
        "POST"
    } else {
        "GET"
    }
}

fn decode<T: serde::de::DeserializeOwned>(path: &str, body: &[u8]) -> Result<T, JobsError> {
    serde_json::from_slice(body).map_err(|e| JobsError::Decode {
        path: path.to_owned(),
        reason: e.to_string(),
    })
}

fn last_chars(text: &str, n: usize) -> String {
    let skip = text.chars().count().saturating_sub(n);
    text.chars().skip(skip).collect()
}
