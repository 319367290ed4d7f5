//! Who may call the admin endpoint, and what (`AdminHttpSecurity`, docs/ARCHITECTURE.md,
//! "Security"). Without authentication configured (a loopback endpoint's default) every request
//! is let in, as before. With it, a request says who it is by its client certificate (a
//! principal the config gives a role) or a bearer token; the read-only role may only read
//! (GET, HEAD). The console's own pages are open (they hold no data; the console asks for a
//! token), and `/metrics` with `/v1/status/ready` when `laminar.http.monitoring.open` says so.

use laminar_security::bearer_tokens::Role;
use laminar_security::Principal;

use super::request::RequestHead;
use super::routes::{Response, METRICS_PATH, READY_PATH};
use crate::config::broker::admin_http::AdminHttpSecurity;

/// Who is calling, for the audit line, and with what role.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    pub name: String,
    pub role: Role,
}

/// The caller of `head`, or the refusal: 401 (who are you?) or 403 (not with that role).
pub fn authorize(
    security: &AdminHttpSecurity,
    head: &RequestHead,
    certificate: Option<&Principal>,
) -> Result<Caller, Response> {
    let anonymous = |role| Caller {
        name: "anonymous".into(),
        role,
    };
    if !security.authenticates() {
        return Ok(anonymous(Role::Admin));
    }
    let is_open_page = head.path == "/" || head.path == "/ui" || head.path.starts_with("/ui/");
    let is_monitoring = head.path == METRICS_PATH || head.path == READY_PATH;
    if is_open_page || (security.monitoring_open && is_monitoring) {
        return Ok(anonymous(Role::ReadOnly));
    }
    let caller = certificate
        .and_then(|principal| certificate_role(security, principal))
        .or_else(|| {
            let token = head.bearer_token.as_deref()?;
            let (name, role) = security.tokens.holder_of(token)?;
            Some(Caller {
                name: format!("token:{name}"),
                role,
            })
        });
    let Some(caller) = caller else {
        return Err(Response::error(
            401,
            "a bearer token or a client certificate is needed",
        ));
    };
    let reads = head.method == "GET" || head.method == "HEAD";
    if caller.role == Role::ReadOnly && !reads {
        return Err(Response::error(403, &format!("{} may only read", caller.name)));
    }
    Ok(caller)
}

fn certificate_role(security: &AdminHttpSecurity, principal: &Principal) -> Option<Caller> {
    let role = if security.admin_principals.contains(principal) {
        Role::Admin
    } else if security.read_only_principals.contains(principal) {
        Role::ReadOnly
    } else {
        return None;
    };
    Some(Caller {
        name: principal.to_string(),
        role,
    })
}

#[cfg(test)]
mod tests {
    use laminar_security::bearer_tokens::BearerTokens;

    use super::*;

    const ADMIN: &str = "admin-token-0123456789abcdef";
    const READER: &str = "reader-token-0123456789abcdef";

    fn security(monitoring_open: bool) -> AdminHttpSecurity {
        AdminHttpSecurity {
            tls: None,
            tokens: BearerTokens::parse(&format!("admin ops {ADMIN}\nread-only grafana {READER}\n")).unwrap(),
            admin_principals: vec!["User:CN=ops".parse().unwrap()],
            read_only_principals: Vec::new(),
            monitoring_open,
        }
    }

    fn head(method: &str, path: &str, token: Option<&str>) -> RequestHead {
        RequestHead {
            method: method.into(),
            path: path.into(),
            bearer_token: token.map(str::to_string),
            ..RequestHead::default()
        }
    }

    fn status(result: Result<Caller, Response>) -> u16 {
        result.map_or_else(|refused| refused.status, |_| 200)
    }

    #[test]
    fn roles_decide_what_a_caller_may_do() {
        let s = security(false);
        let check = |method, path, token| status(authorize(&s, &head(method, path, token), None));
        assert_eq!(check("GET", "/v1/status", None), 401);
        assert_eq!(
            check("GET", "/v1/status", Some("wrong-token-0123456789abcdef")),
            401
        );
        assert_eq!(check("GET", "/v1/status", Some(READER)), 200);
        assert_eq!(check("POST", "/v1/topics", Some(READER)), 403);
        assert_eq!(check("POST", "/v1/topics", Some(ADMIN)), 200);
        assert_eq!(check("GET", "/metrics", None), 401);
        assert_eq!(check("GET", "/ui/app.js", None), 200);
        let open = security(true);
        assert_eq!(
            status(authorize(&open, &head("GET", "/metrics", None), None)),
            200
        );
        assert_eq!(
            status(authorize(&open, &head("GET", "/v1/status", None), None)),
            401
        );
        let ops: Principal = "User:CN=ops".parse().unwrap();
        let by_certificate = authorize(&s, &head("DELETE", "/v1/topics/t", None), Some(&ops)).unwrap();
        assert_eq!(
            (by_certificate.name.as_str(), by_certificate.role),
            ("User:CN=ops", Role::Admin)
        );
    }

    #[test]
    fn without_authentication_everything_is_let_in() {
        let mut s = security(false);
        s.tokens = BearerTokens::default();
        s.admin_principals.clear();
        assert_eq!(
            status(authorize(&s, &head("POST", "/v1/topics", None), None)),
            200
        );
    }
}
