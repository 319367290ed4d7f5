//! The console at `/ui`: three static files embedded in the binary at build time
//! (`include_str!`), plain HTML, CSS and JavaScript with no build step and no external assets
//! (decision 0015). The pages call the JSON API under `/v1/`; the server does nothing for the
//! console beyond sending these files.

use super::request::RequestHead;
use super::routes::Response;

const INDEX_HTML: &str = include_str!("console/index.html");
const APP_JS: &str = include_str!("console/app.js");
const STYLE_CSS: &str = include_str!("console/style.css");

/// The console's answer to `head`, or `None` when the path is not the console's.
pub fn page(head: &RequestHead) -> Option<Response> {
    let (content_type, body) = match head.path.as_str() {
        "/ui" | "/ui/" | "/ui/index.html" => ("text/html; charset=utf-8", INDEX_HTML),
        "/ui/app.js" => ("text/javascript; charset=utf-8", APP_JS),
        "/ui/style.css" => ("text/css; charset=utf-8", STYLE_CSS),
        "/" => {
            return Some(Response {
                status: 200,
                content_type: "text/html; charset=utf-8",
                body: "<!doctype html><title>Laminar</title><a href=\"/ui\">Laminar console</a>\n".into(),
                allow: "",
            })
        }
        path if path.starts_with("/ui/") => {
            return Some(Response::error(404, &format!("no such page: {path}")));
        }
        _ => return None,
    };
    if head.method != "GET" {
        return Some(Response::error(405, &format!("{} only serves GET", head.path)));
    }
    Some(Response {
        status: 200,
        content_type,
        body: body.to_string(),
        allow: "",
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get(path: &str) -> Option<Response> {
        page(&RequestHead {
            method: "GET".into(),
            path: path.into(),
            ..RequestHead::default()
        })
    }

    #[test]
    fn serves_the_embedded_files_and_nothing_else() {
        let index = get("/ui").unwrap();
        assert_eq!(index.status, 200);
        assert!(index.body.contains("app.js"));
        assert_eq!(
            get("/ui/app.js").unwrap().content_type,
            "text/javascript; charset=utf-8"
        );
        assert_eq!(get("/ui/style.css").unwrap().status, 200);
        assert_eq!(get("/ui/../etc/passwd").unwrap().status, 404);
        assert!(get("/metrics").is_none());
        let post = page(&RequestHead {
            method: "POST".into(),
            path: "/ui".into(),
            ..RequestHead::default()
        });
        assert_eq!(post.unwrap().status, 405);
    }

    #[test]
    fn pages_load_nothing_from_elsewhere() {
        for asset in [INDEX_HTML, APP_JS, STYLE_CSS] {
            // The SVG namespace is a name, not something fetched.
            let asset = asset.replace("\"http://www.w3.org/2000/svg\"", "");
            assert!(!asset.contains("http://") && !asset.contains("https://"));
        }
    }
}
