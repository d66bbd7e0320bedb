import FleetJSON

/// The frame every console page shares: head, navigation, sign-out, and the main region.
public enum ConsoleFrame {
    /// The console's sections, for the navigation.
    public enum Section: String, Sendable, CaseIterable {
        case apps = "Apps"
        case devices = "Devices"
        case groups = "Groups"
        case tokens = "Enrollment tokens"
        case audit = "Audit trail"
        case webhooks = "Webhooks"
        case people = "People"
        case account = "Your account"

        public var path: String {
            switch self {
            case .apps: "/console/apps"
            case .devices: "/console/devices"
            case .groups: "/console/groups"
            case .tokens: "/console/tokens"
            case .audit: "/console/audit"
            case .webhooks: "/console/webhooks"
            case .people: "/console/people"
            case .account: "/console/account"
            }
        }
    }

    /// The sections the signed-in account may open, for the navigation of the pages drawn in
    /// this task (`nil`: every section). The console's routes set it for each request from the
    /// account's role, so that no page has to be told.
    @TaskLocal public static var sections: Set<Section>?

    /// A whole page. `csrf` is the session's token (`nil`: signed out, no navigation); `live`:
    /// the page follows the server's events and redraws its main region.
    public static func page(title: String, section: Section?, csrf: String?, live: Bool = false, main: HTML) -> HTML {
        let navigation: HTML
        if let csrf {
            let shown = Section.allCases.filter { sections?.contains($0) ?? true }
            let links = shown.map { item -> HTML in
                "<li><a href=\"\(item.path)\"\(flag: "aria-current=\"page\"", item == section)>\(item.rawValue)</a></li>"
            }
            navigation = """
                <nav aria-label="Console"><a class="brand" href="/console">fleetset</a><ul>\(HTML.joined(links))</ul>\
                <form method="post" action="/console/sign-out" class="sign-out"><input type="hidden" name="csrf" value="\(csrf)"><button type="submit">Sign out</button></form></nav>
                """
        } else {
            navigation = "<nav aria-label=\"Console\"><span class=\"brand\">fleetset</span></nav>"
        }
        return """
            <!doctype html>
            <html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
            <title>\(title) · fleetset console</title>
            <link rel="stylesheet" href="\(ConsoleAssets.stylesheet.path)"><script src="\(ConsoleAssets.script.path)" defer></script></head>
            <body\(flag: "data-live", live)><a class="skip" href="#main">Skip to the content</a>
            <header class="top">\(navigation)</header>
            <main id="main" tabindex="-1">\(main)</main>
            </body></html>
            """
    }

    /// A time as `2026-11-24 19:05:04 UTC (3 min ago)`.
    public static func time(_ seconds: Int64?, now: Int64) -> HTML {
        guard let seconds else { return "never" }
        let iso = Timestamp.format(seconds)
        return "<time datetime=\"\(iso)\" title=\"\(iso)\">\(ago(seconds, now: now))</time>"
    }

    /// `just now`, `3 min ago`, `2 h ago`, `5 days ago`.
    public static func ago(_ seconds: Int64, now: Int64) -> String {
        let elapsed = max(0, now - seconds)
        switch elapsed {
        case ..<60: return "just now"
        case ..<3600: return "\(elapsed / 60) min ago"
        case ..<86_400: return "\(elapsed / 3600) h ago"
        default: return "\(elapsed / 86_400) days ago"
        }
    }

    /// A notice at the top of a page (`role=status`), or an error (`role=alert`).
    public static func notice(_ text: String, error: Bool = false) -> HTML {
        error ? "<p class=\"notice error\" role=\"alert\">\(text)</p>" : "<p class=\"notice\" role=\"status\">\(text)</p>"
    }
}
