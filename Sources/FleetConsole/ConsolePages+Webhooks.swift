import FleetJSON
import FleetProtocol

extension ConsolePages {
    /// The webhook subscriptions, each with its messages' states and its latest messages; dead
    /// ones (tried for a day) marked, with a button that sends them again. Secrets are never shown:
    /// `fleetset admin webhooks add` writes them to a file.
    public static func webhooks(_ details: [WebhookDetail], csrf: String, notice: HTML? = nil) -> HTML {
        let sections = details.map { detail -> HTML in
            let webhook = detail.webhook
            let rows = detail.messages.map { message -> HTML in
                """
                <tr\(flag: "class=\"refused\"", message.state == "dead")><td><code>\(message.id)</code></td><td><code>\(message.type)</code></td>\
                <td>\(message.state)</td><td><time datetime="\(Timestamp.format(message.occurredAt))">\(Timestamp.format(message.occurredAt))</time></td>\
                <td class="num">\(message.attempts)</td><td>\(message.lastResult ?? "-")</td><td>\(message.nextAttemptAt.map(Timestamp.format) ?? "-")</td></tr>
                """
            }
            let redeliver: HTML =
                webhook.dead > 0
                ? """
                <form method="post" action="/console/webhooks/\(webhook.id)/redeliver"><input type="hidden" name="csrf" value="\(csrf)">\
                <button type="submit" aria-label="Send the dead messages of \(webhook.id) again">Send \(webhook.dead) dead message(s) again</button></form>
                """ : .empty
            return """
                <section aria-labelledby="webhook-\(webhook.id)"><h2 id="webhook-\(webhook.id)"><code>\(webhook.id)</code> → \(webhook.url)</h2>
                <p>\(webhook.events.joined(separator: ", ")) of \(webhook.apps.isEmpty ? "every app" : webhook.apps.joined(separator: ", ")). \
                \(webhook.pending) pending, \(webhook.delivered) delivered, <strong>\(webhook.dead) dead</strong>.</p>
                \(redeliver)
                \(detail.messages.isEmpty ? "<p>No messages yet.</p>" : """
                <div class="table-wrap"><table><thead><tr><th scope="col">Message</th><th scope="col">Type</th><th scope="col">State</th><th scope="col">Occurred</th><th scope="col">Attempts</th><th scope="col">Last result</th><th scope="col">Next attempt</th></tr></thead>
                <tbody>\(HTML.joined(rows))</tbody></table></div>
                """ as HTML)
                </section>
                """
        }
        return ConsoleFrame.page(
            title: "Webhooks", section: .webhooks, csrf: csrf,
            main: """
                <h1>Webhooks</h1>
                \(notice ?? .empty)
                <p>Where the server sends events, signed (Standard Webhooks). A message that fails is tried again for a day, then it is dead until it is sent again. Subscribe with <code>fleetset admin webhooks add</code>.</p>
                \(details.isEmpty ? "<p>No subscriptions.</p>" : HTML.joined(sections))
                """)
    }
}
