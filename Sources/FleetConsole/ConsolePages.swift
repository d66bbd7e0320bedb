import FleetJSON
import FleetMetadata
import FleetProtocol
import FleetServerCore

/// The console's pages, as HTML from values (the routes in `FleetServer` read the service and
/// call these).
public enum ConsolePages {
    // MARK: - Sign in

    /// How the sign-in page offers to sign in.
    public struct SignInChoices: Sendable, Hashable {
        /// The identity provider's name, when single sign-on is configured.
        public var singleSignOn: String?
        /// Whether a name and password sign in.
        public var passwords: Bool

        public init(singleSignOn: String? = nil, passwords: Bool = true) {
            self.singleSignOn = singleSignOn
            self.passwords = passwords
        }
    }

    /// The sign-in page: single sign-on when configured (a link, not a form: the console's
    /// `form-action 'self'` would stop a form's redirect to the provider), a name and password unless turned off,
    /// and the admin token file folded away (always: the owner's way in when all else fails).
    public static func signIn(error: String? = nil, choices: SignInChoices = SignInChoices()) -> HTML {
        let singleSignOn: HTML? = choices.singleSignOn.map { provider in
            """
            <p class="sso-sign-in"><a class="button" href="/console/sso/start">Sign in with \(provider)</a></p>
            """
        }
        let password: HTML? =
            choices.passwords
            ? """
            <form method="post" action="/console/sign-in" class="sign-in">
            <label for="name">Name</label>
            <input type="text" id="name" name="name" autocomplete="username" autocapitalize="none" spellcheck="false" required>
            <label for="password">Password</label>
            <input type="password" id="password" name="password" autocomplete="current-password" required>
            <button type="submit"\(attribute: "class", choices.singleSignOn == nil ? "primary" : nil)>Sign in</button>
            </form>
            """ : nil
        return ConsoleFrame.page(
            title: "Sign in", section: nil, csrf: nil,
            main: """
                <h1>Sign in to the fleetset console</h1>
                \(error.map { ConsoleFrame.notice($0, error: true) })
                \(singleSignOn)
                \(password)
                <details class="admin-token"><summary>Sign in with the server's admin token file</summary>
                <form method="post" action="/console/sign-in" class="sign-in token-sign-in">
                <label for="token">Admin token</label>
                <input type="password" id="token" name="token" autocomplete="current-password" required aria-describedby="token-help">
                <p class="help" id="token-help">The token in the server's admin token file (<code>fsa_…</code>): you act as the account <code>owner</code>. It is sent once; the console then keeps a session cookie.</p>
                <button type="submit">Sign in with the token</button>
                </form></details>
                """)
    }

    /// The page a single sign-on lands on: it sets the session cookie and moves on to the
    /// console from this site (a redirect straight from the provider's would not carry the
    /// console's `SameSite=Strict` cookie on its first request).
    public static func signedIn(continueTo path: String) -> HTML {
        HTML(
            raw: """
                <!doctype html>
                <html lang="en"><head><meta charset="utf-8"><title>Signed in · fleetset</title>
                <meta http-equiv="refresh" content="0;url=\(HTML.escape(path))">
                <link rel="stylesheet" href="\(ConsoleAssets.stylesheet.path)"></head>
                <body><main><p>Signed in. <a href="\(HTML.escape(path))" id="continue">Continue to the console</a>.</p></main></body></html>
                """)
    }

    /// The second step of a sign-in for an account with a second factor: the code.
    public static func signInCode(csrf: String, error: String? = nil) -> HTML {
        ConsoleFrame.page(
            title: "Your code", section: nil, csrf: nil,
            main: """
                <h1>Enter your code</h1>
                \(error.map { ConsoleFrame.notice($0, error: true) })
                <form method="post" action="/console/sign-in/code" class="sign-in">
                <input type="hidden" name="csrf" value="\(csrf)">
                <label for="code">Code</label>
                <input type="text" id="code" name="code" inputmode="numeric" autocomplete="off" autocapitalize="none" spellcheck="false" required aria-describedby="code-help">
                <p class="help" id="code-help">The six digits your authenticator app shows now, or one of your recovery codes (each works once).</p>
                <button type="submit" class="primary">Sign in</button>
                </form>
                <p><a href="/console/sign-in">Start again</a></p>
                """)
    }

    // MARK: - Apps

    /// Every app with its metadata version, its devices and their roll-up.
    public static func apps(_ overview: FleetOverview, csrf: String) -> HTML {
        let rows = overview.apps.map { app -> HTML in
            let states = RolloutState.allCases.map { state -> HTML in
                "<td class=\"num\" data-state=\"\(state.rawValue)\">\(app.states[state] ?? 0)</td>"
            }
            let rollout: HTML =
                app.rollout.map { rollout -> HTML in
                    """
                    <tr class="rollout-row" data-rollout-app="\(app.app)"><td colspan="9">Rollout <a href="/console/apps/\(app.app)/history">\(rollout.id)</a> \
                    <strong>\(rollout.phase.rawValue)</strong> at wave \(rollout.currentWave + 1) of \(rollout.waves.count) (\(rollout.waves[rollout.currentWave].description))\
                    \(rollout.reason.isEmpty ? "" : ": \(rollout.reason)")</td></tr>
                    """
                } ?? .empty
            return """
                <tr data-app="\(app.app)"><th scope="row"><a href="/console/apps/\(app.app)">\(app.app)</a>\(app.title.map { t -> HTML in "<br><span class=\"muted\">\(t)</span>" })</th>\
                <td class="num">\(app.version)</td><td class="num" data-devices>\(app.devices)</td><td class="num" data-on-newest>\(app.onNewest)</td>\(HTML.joined(states))\
                <td>\(rollupBar(app))</td></tr>\(rollout)
                """
        }
        let table: HTML =
            overview.apps.isEmpty
            ? "<p>No app has metadata yet. Upload one with <code>fleetset admin put-metadata</code>.</p>"
            : """
            <div class="table-wrap"><table class="apps"><caption class="visually-hidden">Apps and their devices' standing with the newest settings</caption>
            <thead><tr><th scope="col">App</th><th scope="col">Metadata version</th><th scope="col">Devices</th><th scope="col">On newest revision</th>\
            <th scope="col">Applied</th><th scope="col">Error</th><th scope="col">Unsupported</th><th scope="col">Nothing yet</th><th scope="col"><span class="visually-hidden">Roll-up</span></th></tr></thead>
            <tbody>\(HTML.joined(rows))</tbody></table></div>
            """
        return ConsoleFrame.page(
            title: "Apps", section: .apps, csrf: csrf, live: true,
            main: """
                <h1>Apps</h1>
                <p class="lead">For each app: how many of its devices have fetched the newest settings, and what they reported about them. This page follows the fleet as it reports.</p>
                <div data-live-region="apps">\(table)</div>
                """)
    }

    private static func rollupBar(_ app: AppRollup) -> HTML {
        guard app.devices > 0 else { return "<span class=\"muted\">no devices</span>" }
        let parts = RolloutState.allCases.compactMap { state -> HTML? in
            let count = app.states[state] ?? 0
            guard count > 0 else { return nil }
            // Widths in steps of 5 %, as classes: the policy allows no inline style.
            let width = max(5, Int((Double(count) * 20 / Double(app.devices)).rounded()) * 5)
            return "<span class=\"bar-\(state.rawValue) w-\(width)\"></span>"
        }
        let summary = RolloutState.allCases.map { "\(app.states[$0] ?? 0) \(label($0))" }.joined(separator: ", ")
        return "<span class=\"bar\" role=\"img\" aria-label=\"\(summary)\">\(HTML.joined(parts))</span>"
    }

    static func label(_ state: RolloutState) -> String {
        switch state {
        case .applied: "applied"
        case .error: "error"
        case .unsupported: "unsupported"
        case .waiting: "nothing yet"
        }
    }

    static func stateBadge(_ state: RolloutState) -> HTML {
        "<span class=\"state state-\(state.rawValue)\">\(label(state))</span>"
    }

    // MARK: - App settings

    /// An app's settings form at one scope, with the scope picker.
    public static func appSettings(
        app: String, form: SettingsForm, scopes: [String], csrf: String, notice: HTML? = nil
    ) -> HTML {
        let scope = form.view.scope.description
        let options = scopes.map { option -> HTML in "<option value=\"\(option)\"></option>" }
        let scopeHelp: HTML =
            switch form.view.scope {
            case .app: "Values here reach every device with the app, unless a group or the device sets its own."
            case .group(let name): "Values here reach the devices in group <strong>\(name)</strong>, over the app's."
            case .device(let id):
                "Values here reach only device <a href=\"/console/devices/\(id)\">\(id)</a>, over its groups' and the app's."
            case .defaults: ""
            }
        return ConsoleFrame.page(
            title: "\(app) settings", section: .apps, csrf: csrf,
            main: """
                <h1>\(app) <span class="muted">settings</span></h1>
                \(appTabs(app, current: "settings"))
                \(notice)
                <form method="get" action="/console/apps/\(app)" class="scope-picker">
                <label for="scope">Scope</label>
                <input id="scope" name="scope" list="scopes" value="\(scope)" aria-describedby="scope-help" autocomplete="off">
                <datalist id="scopes">\(HTML.joined(options))</datalist>
                <button type="submit">Show</button>
                <p class="help" id="scope-help"><code>app</code>, <code>group:NAME</code> or <code>device:ID</code>. \(scopeHelp)</p>
                </form>
                \(form.render(action: "/console/apps/\(app)/settings?scope=\(percentEncoded(scope))", csrf: csrf))
                """)
    }

    static func appTabs(_ app: String, current: String) -> HTML {
        let tabs = [
            ("settings", "Settings", "/console/apps/\(app)"), ("metadata", "Metadata", "/console/apps/\(app)/metadata"),
            ("history", "History and rollouts", "/console/apps/\(app)/history"),
        ]
        let links = tabs.map { id, title, path -> HTML in
            "<li><a href=\"\(path)\"\(flag: "aria-current=\"page\"", id == current)>\(title)</a></li>"
        }
        return
            "<nav class=\"tabs\" aria-label=\"\(app)\"><ul>\(HTML.joined(links))<li><a href=\"/console/devices?app=\(percentEncoded(app))\">Devices</a></li></ul></nav>"
    }

    /// A query parameter's value, percent-encoded (RFC 3986 unreserved characters stay).
    public static func percentEncoded(_ text: String) -> String {
        var output = ""
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"), UInt8(ascii: ":"):
                output.unicodeScalars.append(Unicode.Scalar(byte))
            default:
                output += "%" + (byte < 16 ? "0" : "") + String(byte, radix: 16, uppercase: true)
            }
        }
        return output
    }
}
