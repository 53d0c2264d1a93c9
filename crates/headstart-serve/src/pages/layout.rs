//! The page shell: title, the embedded stylesheet, the navigation.

use maud::{html, Markup, DOCTYPE};

/// A page titled `title` around `body`; `script` adds the live script.
pub fn page(title: &str, script: bool, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · headstart" }
                link rel="stylesheet" href="/assets/style.css";
                @if script {
                    script src="/assets/live.js" defer {}
                }
            }
            body {
                nav {
                    a.brand href="/" { "headstart" }
                    a href="/" { "sessions" }
                    a href="/fleet" { "fleet" }
                }
                main { (body) }
            }
        }
    }
}
