import FleetJSON
import FleetProtocol

extension ConsolePages {
    // MARK: - Your account

    /// The signed-in account: who it is, its password, its second factor.
    public static func account(_ account: Account, csrf: String, notice: HTML? = nil) -> HTML {
        let twoFactor: HTML =
            account.hasTwoFactor
            ? "<p>Two-factor sign-in is <strong>on</strong>. If you lose your authenticator and your recovery codes, an owner resets it.</p>"
            : """
            <p>Two-factor sign-in is <strong>off</strong>: your password alone signs you in.</p>
            <form method="post" action="/console/account/two-factor"><input type="hidden" name="csrf" value="\(csrf)">\
            <button type="submit" class="primary">Set up two-factor sign-in</button></form>
            """
        let password: HTML =
            account.kind == .person
            ? """
            <h2>Password</h2>
            <form method="post" action="/console/account/password" class="stacked"><input type="hidden" name="csrf" value="\(csrf)">
            <input type="text" name="username" value="\(account.name)" autocomplete="username" hidden>
            \(account.hasPassword ? "<label for=\"current\">Current password</label><input type=\"password\" id=\"current\" name=\"current\" autocomplete=\"current-password\" required>" as HTML : .empty)
            <label for="new-password">New password</label>
            <input type="password" id="new-password" name="password" autocomplete="new-password" minlength="12" required aria-describedby="password-help">
            <p class="help" id="password-help">At least 12 characters. Your other sessions end; this one goes on.</p>
            <button type="submit">Change the password</button></form>
            <h2>Two-factor sign-in</h2>
            \(twoFactor)
            """
            : "<p>A service account uses API tokens; it never signs in to the console.</p>"
        return ConsoleFrame.page(
            title: "Your account", section: .account, csrf: csrf,
            main: """
                <h1>\(account.displayName.isEmpty ? account.name : account.displayName)</h1>
                \(notice)
                <dl class="facts"><dt>Name</dt><dd><code>\(account.name)</code></dd><dt>Role</dt><dd>\(account.role.rawValue)</dd>\
                <dt>Scope</dt><dd>\(account.scope.summary)</dd></dl>
                \(password)
                """)
    }

    /// Setting up two-factor sign-in: the QR code of the authenticator's URI (drawn here, as
    /// SVG), the secret to type instead, and the form for the first code.
    public static func twoFactorSetup(_ setup: TwoFactorSetup, csrf: String, error: String? = nil) -> HTML {
        let picture: HTML
        if let code = try? QRCode(setup.uri) {
            picture = HTML(raw: code.svg(moduleSize: 5, accessibilityLabel: "QR code for your authenticator app"))
        } else {
            picture = "<p>(The code is too long to draw; type the secret below.)</p>"
        }
        return ConsoleFrame.page(
            title: "Two-factor sign-in", section: .account, csrf: csrf,
            main: """
                <h1>Set up two-factor sign-in</h1>
                \(error.map { ConsoleFrame.notice($0, error: true) })
                <ol><li>Scan this code with your authenticator app (or type the secret).</li><li>Enter the six digits it shows.</li></ol>
                <figure class="qr" data-qr>\(picture)</figure>
                <p>Secret: <code class="secret" data-secret>\(setup.secret)</code></p>
                <form method="post" action="/console/account/two-factor/confirm" class="stacked"><input type="hidden" name="csrf" value="\(csrf)">
                <label for="code">Code</label>
                <input type="text" id="code" name="code" inputmode="numeric" autocomplete="off" required>
                <button type="submit" class="primary">Turn on two-factor sign-in</button></form>
                """)
    }

    /// The recovery codes, shown once when two-factor sign-in is turned on.
    public static func recoveryCodes(_ codes: RecoveryCodeList, csrf: String) -> HTML {
        let items = codes.codes.map { code -> HTML in "<li><code>\(code)</code></li>" }
        return ConsoleFrame.page(
            title: "Recovery codes", section: .account, csrf: csrf,
            main: """
                <h1>Two-factor sign-in is on</h1>
                <p>Keep these recovery codes somewhere safe, away from your phone. Each signs you in once in place of a code. <strong>They are shown only now.</strong></p>
                <ul class="recovery-codes" data-recovery-codes>\(HTML.joined(items))</ul>
                <p><a href="/console/account">Back to your account</a></p>
                """)
    }

    // MARK: - People

    /// Every account, with forms to add one and to change a role or disable one (owners only).
    public static func people(_ accounts: [Account], csrf: String, notice: HTML? = nil) -> HTML {
        let rows = accounts.map { account -> HTML in
            let roles = Role.allCases.map { role -> HTML in
                "<option value=\"\(role.rawValue)\"\(flag: "selected", role == account.role)>\(role.rawValue)</option>"
            }
            return """
                <tr data-account="\(account.name)"><th scope="row"><code>\(account.name)</code><br><span class="muted">\(account.displayName)</span></th>\
                <td>\(account.kind.rawValue)</td><td>\(account.scope.summary)</td><td>\(account.hasTwoFactor ? "on" : "off")</td>\
                <td>\(account.disabled ? "disabled" : "enabled")</td>\
                <td><form method="post" action="/console/people/\(account.name)" class="inline"><input type="hidden" name="csrf" value="\(csrf)">\
                <label class="visually-hidden" for="role-\(account.name)">Role of \(account.name)</label><select id="role-\(account.name)" name="role">\(HTML.joined(roles))</select>\
                <button type="submit" name="action" value="role">Set role</button>\
                <button type="submit" name="action" value="\(account.disabled ? "enable" : "disable")">\(account.disabled ? "Enable" : "Disable")</button></form></td></tr>
                """
        }
        let roleOptions = Role.allCases.map { role -> HTML in
            "<option value=\"\(role.rawValue)\"\(flag: "selected", role == .viewer)>\(role.rawValue)</option>"
        }
        return ConsoleFrame.page(
            title: "People", section: .people, csrf: csrf,
            main: """
                <h1>People and service accounts</h1>
                \(notice)
                <p>A role's rights are listed in <code>docs/admins/people-and-roles.md</code>. Disabling an account or changing its role ends its console sessions at once; its API tokens stop working while it is disabled.</p>
                <div class="table-wrap"><table class="people"><thead><tr><th scope="col">Account</th><th scope="col">Kind</th><th scope="col">Scope</th>\
                <th scope="col">Two-factor</th><th scope="col">State</th><th scope="col">Change</th></tr></thead>
                <tbody>\(HTML.joined(rows))</tbody></table></div>
                <h2>Add a person</h2>
                <form method="post" action="/console/people" class="stacked"><input type="hidden" name="csrf" value="\(csrf)">
                <label for="new-name">Name</label><input id="new-name" name="name" required pattern="[a-z0-9][a-z0-9._\\-]{0,63}" autocomplete="off" aria-describedby="name-help">
                <p class="help" id="name-help">Lowercase letters, digits, <code>.</code>, <code>_</code> and <code>-</code>: it appears in the history and the audit trail.</p>
                <label for="new-display">Display name</label><input id="new-display" name="displayName" autocomplete="off">
                <label for="new-role">Role</label><select id="new-role" name="role">\(HTML.joined(roleOptions))</select>
                <label for="new-apps">Apps (editor, operator, viewer; comma-separated, empty for all)</label><input id="new-apps" name="apps" autocomplete="off">
                <label for="new-groups">Groups (optional, comma-separated)</label><input id="new-groups" name="groups" autocomplete="off">
                <label for="new-password">First password</label><input type="password" id="new-password" name="password" autocomplete="new-password" minlength="12" required>
                <button type="submit" class="primary">Add</button></form>
                """)
    }
}
