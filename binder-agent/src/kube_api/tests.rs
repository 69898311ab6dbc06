//! [`KubeApi`] against a scripted API server: the requests each write sends, status codes and
//! deadlines, the PodGroup condition, event series and truncated notes.

use super::*;
use crate::api::ObservedCondition;
use axum::http::{Method, Request, Response, StatusCode};
use kube::client::Body;
use tower_test::mock::{self, Handle};

type ApiServer = Handle<Request<Body>, Response<Body>>;

fn api() -> (KubeApi, ApiServer) {
    let (service, handle) = mock::pair::<Request<Body>, Response<Body>>();
    let client = Client::new(service, "default");
    let config = KubeApiConfig {
        reporting_controller: "placement-scheduler".into(),
        reporting_instance: "placement-scheduler-binder-0".into(),
        request_timeout: Duration::from_secs(5),
    };
    (KubeApi::new(client, config), handle)
}

fn pod() -> PodRef {
    PodRef {
        namespace: "shop".into(),
        name: "web-1".into(),
        uid: "0b7a-uid".into(),
    }
}

/// The next request: method, path and query, content type, JSON body.
async fn next(
    server: &mut ApiServer,
) -> (
    Method,
    String,
    String,
    serde_json::Value,
    mock::SendResponse<Response<Body>>,
) {
    let (request, send) = server.next_request().await.expect("a request");
    let (parts, body) = request.into_parts();
    let bytes = body.collect_bytes().await.expect("body");
    let json = serde_json::from_slice(&bytes).unwrap_or(serde_json::Value::Null);
    let content_type = parts
        .headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    (parts.method, parts.uri.to_string(), content_type, json, send)
}

fn respond(send: mock::SendResponse<Response<Body>>, code: u16, body: serde_json::Value) {
    let mut response = Response::new(Body::from(serde_json::to_vec(&body).unwrap()));
    *response.status_mut() = StatusCode::from_u16(code).unwrap();
    send.send_response(response);
}

fn status(code: u16, reason: &str, message: &str) -> serde_json::Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
           "message": message, "reason": reason, "code": code})
}

fn group_condition(
    scheduled: bool,
    reason: &str,
    message: &str,
    current: Option<ObservedCondition>,
) -> PodGroupCondition {
    PodGroupCondition {
        namespace: "ml".into(),
        name: "train".into(),
        scheduled,
        reason: reason.into(),
        message: message.into(),
        observed_generation: 3,
        current,
    }
}

fn observed(status: &str, message: &str, at: &str) -> ObservedCondition {
    ObservedCondition {
        status: status.into(),
        reason: if status == "True" { "Scheduled" } else { "Unschedulable" }.into(),
        message: message.into(),
        observed_generation: 3,
        last_transition_time: at.into(),
    }
}

#[tokio::test]
async fn a_restarted_binder_keeps_the_pod_groups_transition_time_while_the_status_stays() {
    const BEFORE: &str = "2026-11-29T00:00:00Z";
    // A binder that never wrote this group (restarted: its memory is gone); the watch shows
    // the condition a previous binder wrote.
    let (restarted, mut server) = api();
    let seen = observed(
        "False",
        "pod group is unschedulable, 0/4 placements are available",
        BEFORE,
    );
    let condition = group_condition(
        false,
        "Unschedulable",
        "pod group is unschedulable, 0/5 placements are available",
        Some(seen.clone()),
    );
    let call = tokio::spawn(async move { restarted.record_pod_group_condition(&condition).await });
    let (method, uri, _, body, send) = next(&mut server).await;
    assert_eq!(method, Method::PATCH);
    assert_eq!(
        uri,
        "/apis/scheduling.k8s.io/v1beta1/namespaces/ml/podgroups/train/status?"
    );
    let c = &body["status"]["conditions"][0];
    assert_eq!(c["status"], "False");
    assert_eq!(c["message"], "pod group is unschedulable, 0/5 placements are available");
    assert_eq!(
        c["lastTransitionTime"], BEFORE,
        "the status stays: its transition time too"
    );
    respond(
        send,
        200,
        json!({"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
                             "metadata": {"name": "train", "namespace": "ml"}}),
    );
    assert_eq!(call.await.unwrap(), Ok(()));

    // The same condition as the object shows: nothing written (no request is answered).
    let (fresh, _server) = api();
    let same = group_condition(
        false,
        "Unschedulable",
        "pod group is unschedulable, 0/4 placements are available",
        Some(seen),
    );
    assert_eq!(
        tokio::time::timeout(Duration::from_secs(2), fresh.record_pod_group_condition(&same)).await,
        Ok(Ok(())),
        "written again though the object shows it already"
    );

    // The status changes: a new transition time.
    let (fresh, mut server) = api();
    let scheduled = group_condition(true, "Scheduled", "", Some(observed("False", "…", BEFORE)));
    let call = tokio::spawn(async move { fresh.record_pod_group_condition(&scheduled).await });
    let (.., body, send) = next(&mut server).await;
    let c = &body["status"]["conditions"][0];
    assert_eq!(c["status"], "True");
    assert_ne!(c["lastTransitionTime"], BEFORE);
    // metav1.Time: RFC 3339 to the second, as the API server keeps it.
    let t = c["lastTransitionTime"].as_str().unwrap();
    assert!(t.len() == BEFORE.len() && t.ends_with('Z'), "{t}");
    respond(
        send,
        200,
        json!({"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
                             "metadata": {"name": "train", "namespace": "ml"}}),
    );
    assert_eq!(call.await.unwrap(), Ok(()));
}

#[tokio::test]
async fn bind_posts_kube_schedulers_binding() {
    let (api, mut server) = api();
    let annotations = BTreeMap::from([("placement.dev/policy".to_string(), "bin-packing".to_string())]);
    let call = tokio::spawn(async move { api.bind(&pod(), "node-7", &annotations).await });
    let (method, uri, content_type, body, send) = next(&mut server).await;
    assert_eq!(method, Method::POST);
    assert_eq!(uri, "/api/v1/namespaces/shop/pods/web-1/binding?");
    assert_eq!(content_type, "application/json");
    assert_eq!(
        body,
        json!({
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": "web-1", "namespace": "shop", "uid": "0b7a-uid",
                         "annotations": {"placement.dev/policy": "bin-packing"}},
            "target": {"apiVersion": "v1", "kind": "Node", "name": "node-7"}
        })
    );
    respond(
        send,
        201,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}),
    );
    assert_eq!(call.await.unwrap(), Ok(()));
}

#[tokio::test]
async fn bind_maps_status_codes() {
    for (code, reason) in [
        (409, "Conflict"),
        (404, "NotFound"),
        (500, "InternalError"),
        (429, "TooManyRequests"),
    ] {
        let (api, mut server) = api();
        let call = tokio::spawn(async move { api.bind(&pod(), "node-7", &BTreeMap::new()).await });
        let (.., send) = next(&mut server).await;
        respond(
            send,
            code,
            status(code, reason, "pod web-1 is already assigned to node node-3"),
        );
        let result = call.await.unwrap();
        match code {
            409 => assert!(
                matches!(result, Err(ApiError::Conflict(ref m)) if m.contains("already assigned")),
                "{result:?}"
            ),
            404 => assert!(matches!(result, Err(ApiError::NotFound(_))), "{result:?}"),
            _ => assert!(matches!(result, Err(ApiError::Other(_))), "{code}: {result:?}"),
        }
    }
}

#[tokio::test]
async fn a_non_status_error_body_is_other() {
    let (api, mut server) = api();
    let call = tokio::spawn(async move { api.bind(&pod(), "node-7", &BTreeMap::new()).await });
    let (.., send) = next(&mut server).await;
    let mut response = Response::new(Body::from(b"upstream connect error".to_vec()));
    *response.status_mut() = StatusCode::BAD_GATEWAY;
    send.send_response(response);
    assert!(matches!(call.await.unwrap(), Err(ApiError::Other(_))));
}

#[tokio::test(start_paused = true)]
async fn a_request_past_its_deadline_is_other() {
    let (api, mut server) = api();
    let call = tokio::spawn(async move { api.bind(&pod(), "node-7", &BTreeMap::new()).await });
    let (.., _send) = next(&mut server).await;
    tokio::time::advance(Duration::from_secs(6)).await;
    let result = call.await.unwrap();
    assert!(
        matches!(result, Err(ApiError::Other(ref m)) if m.contains("timed out")),
        "{result:?}"
    );
}

#[tokio::test]
async fn scheduled_event_is_the_events_v1_recorders() {
    let (api, mut server) = api();
    // Written later than the binding, the event keeps the binding's time.
    let bound_at = std::time::UNIX_EPOCH + Duration::new(1_767_323_045, 123_456_000);
    let call = tokio::spawn(async move { api.record_scheduled(&pod(), "node-7", bound_at).await });
    let (method, uri, _, body, send) = next(&mut server).await;
    assert_eq!(method, Method::POST);
    assert_eq!(uri, "/apis/events.k8s.io/v1/namespaces/shop/events?");
    assert_eq!(body["apiVersion"], "events.k8s.io/v1");
    assert_eq!(body["kind"], "Event");
    assert_eq!(body["type"], "Normal");
    assert_eq!(body["reason"], "Scheduled");
    assert_eq!(body["action"], "Binding");
    assert_eq!(body["note"], "Successfully assigned shop/web-1 to node-7");
    assert_eq!(body["reportingController"], "placement-scheduler");
    assert_eq!(body["reportingInstance"], "placement-scheduler-binder-0");
    assert_eq!(
        body["regarding"],
        json!({"apiVersion": "v1", "kind": "Pod", "name": "web-1", "namespace": "shop", "uid": "0b7a-uid"})
    );
    assert_eq!(body["metadata"]["namespace"], "shop");
    // Named `{pod}.{hex unix nanos}` of its time; MicroTime: microseconds, UTC.
    assert_eq!(body["metadata"]["name"], "web-1.1886caf223f1fc00");
    assert_eq!(body["eventTime"], "2026-01-02T03:04:05.123456Z");
    assert!(body.get("series").is_none());
    respond(send, 201, body.clone());
    assert_eq!(call.await.unwrap(), Ok(()));
}

#[tokio::test]
async fn unschedulable_patches_the_condition_then_warns() {
    let (api, mut server) = api();
    let message = "0/3 nodes are available: 3 Insufficient cpu. preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod.";
    let call = tokio::spawn(async move { api.record_unschedulable(&pod(), message).await });

    let (method, uri, content_type, body, send) = next(&mut server).await;
    assert_eq!(method, Method::PATCH);
    assert_eq!(uri, "/api/v1/namespaces/shop/pods/web-1/status?");
    assert_eq!(content_type, "application/strategic-merge-patch+json");
    let conditions = body["status"]["conditions"].as_array().unwrap();
    assert_eq!(conditions.len(), 1);
    let c = &conditions[0];
    assert_eq!(c["type"], "PodScheduled");
    assert_eq!(c["status"], "False");
    assert_eq!(c["reason"], "Unschedulable");
    assert_eq!(c["message"], message);
    assert!(c["lastProbeTime"].is_null() && c.as_object().unwrap().contains_key("lastProbeTime"));
    let t = c["lastTransitionTime"].as_str().unwrap();
    assert!(t.len() == "2026-01-02T03:04:05Z".len() && t.ends_with('Z'), "{t}");
    assert_eq!(body.as_object().unwrap().len(), 1, "only status is patched: {body}");
    respond(
        send,
        200,
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web-1", "namespace": "shop"}}),
    );

    let (method, uri, _, body, send) = next(&mut server).await;
    assert_eq!(method, Method::POST);
    assert_eq!(uri, "/apis/events.k8s.io/v1/namespaces/shop/events?");
    assert_eq!(body["type"], "Warning");
    assert_eq!(body["reason"], "FailedScheduling");
    assert_eq!(body["action"], "Scheduling");
    assert_eq!(body["note"], message);
    assert_eq!(body["regarding"]["uid"], "0b7a-uid");
    respond(send, 201, body.clone());
    assert_eq!(call.await.unwrap(), Ok(()));
}

#[tokio::test]
async fn repeated_failures_become_a_series_without_repatching() {
    let (api, mut server) = api();
    let api = std::sync::Arc::new(api);
    let first = {
        let api = api.clone();
        tokio::spawn(async move {
            api.record_unschedulable(&pod(), "0/1 nodes are available: 1 Too many pods.")
                .await
        })
    };
    let (.., send) = next(&mut server).await; // status patch
    respond(send, 200, json!({}));
    let (_, _, _, event, send) = next(&mut server).await;
    let name = event["metadata"]["name"].as_str().unwrap().to_string();
    respond(send, 201, event.clone());
    first.await.unwrap().unwrap();

    // Same message again: no status patch, the first event's series count goes to 2.
    let second = {
        let api = api.clone();
        tokio::spawn(async move {
            api.record_unschedulable(&pod(), "0/1 nodes are available: 1 Too many pods.")
                .await
        })
    };
    let (method, uri, content_type, body, send) = next(&mut server).await;
    assert_eq!(method, Method::PATCH);
    assert_eq!(uri, format!("/apis/events.k8s.io/v1/namespaces/shop/events/{name}?"));
    assert_eq!(content_type, "application/strategic-merge-patch+json");
    assert_eq!(body["series"]["count"], 2);
    assert!(body["series"]["lastObservedTime"].is_string());
    respond(send, 200, event.clone());
    second.await.unwrap().unwrap();

    // A third occurrence right away is counted, not written.
    api.record_unschedulable(&pod(), "0/1 nodes are available: 1 Too many pods.")
        .await
        .unwrap();

    // A new message: the condition is patched again, and a new event starts.
    let third = {
        let api = api.clone();
        tokio::spawn(async move {
            api.record_unschedulable(&pod(), "0/2 nodes are available: 2 Insufficient memory.")
                .await
        })
    };
    let (method, uri, _, body, send) = next(&mut server).await;
    assert_eq!(
        (method, uri.as_str()),
        (Method::PATCH, "/api/v1/namespaces/shop/pods/web-1/status?")
    );
    assert_eq!(
        body["status"]["conditions"][0]["message"],
        "0/2 nodes are available: 2 Insufficient memory."
    );
    respond(send, 200, json!({}));
    let (method, _, _, body, send) = next(&mut server).await;
    assert_eq!(method, Method::POST);
    assert_eq!(body["note"], "0/2 nodes are available: 2 Insufficient memory.");
    respond(send, 201, body.clone());
    third.await.unwrap().unwrap();
}

#[tokio::test]
async fn unschedulable_on_a_deleted_pod_writes_no_event() {
    let (api, mut server) = api();
    let call = tokio::spawn(async move { api.record_unschedulable(&pod(), "0/1 nodes are available").await });
    let (.., send) = next(&mut server).await;
    respond(send, 404, status(404, "NotFound", "pods \"web-1\" not found"));
    assert!(matches!(call.await.unwrap(), Err(ApiError::NotFound(_))));
}

#[test]
fn notes_are_truncated_like_kube_scheduler() {
    assert_eq!(truncate_note("short"), "short");
    let long = "x".repeat(2000);
    let t = truncate_note(&long);
    assert_eq!(t.len(), NOTE_LENGTH_LIMIT);
    assert!(t.ends_with("x ..."));
    let multibyte = "é".repeat(1000);
    assert!(truncate_note(&multibyte).len() <= NOTE_LENGTH_LIMIT);
}
