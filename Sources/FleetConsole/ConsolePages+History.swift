import FleetJSON
import FleetProtocol

extension ConsolePages {
    // MARK: - History and rollouts

    /// An app's rollout (active or latest) with its progress and, while it is active, Resume
    /// and Abort; then its history of writes, newest first.
    public static func history(app: String, entries: [HistoryRecord], rollout: RolloutView?, csrf: String, notice: HTML? = nil) -> HTML {
        let rows = entries.reversed().map { entry -> HTML in
            """
            <tr><td class="num">\(entry.number)</td><td>\(Timestamp.format(entry.at))</td><td>\(entry.actor)</td><td>\(entry.kind)</td>\
            <td>\(entry.changeSummary)</td><td>\(entry.message)</td></tr>
            """
        }
        let table: HTML =
            entries.isEmpty
            ? "<p>No writes yet.</p>"
            : """
            <div class="table-wrap"><table class="history"><caption class="visually-hidden">Writes of \(app)'s values and metadata, newest first</caption>
            <thead><tr><th scope="col">Entry</th><th scope="col">When</th><th scope="col">Who</th><th scope="col">Kind</th><th scope="col">Change</th>\
            <th scope="col">Message</th></tr></thead><tbody>\(HTML.joined(rows))</tbody></table></div>
            """
        return ConsoleFrame.page(
            title: "\(app) history", section: .apps, csrf: csrf, live: true,
            main: """
                <h1>\(app) <span class="muted">history</span></h1>
                \(appTabs(app, current: "history"))
                \(notice)
                <div data-live-region="history">
                \(rollout.map { rolloutBox($0, csrf: csrf) })
                <h2>Writes</h2>
                <p class="help">Every write of the app's values and metadata, secrets masked. Each write is an entry, numbered per app (not a device's revision). To make the values what they were after one: <code>fleetset admin revert --app \(app) --to ENTRY</code>.</p>
                \(table)
                </div>
                """)
    }

    /// The rollout's state, wave by wave, the devices not done, and its buttons.
    static func rolloutBox(_ rollout: RolloutView, csrf: String) -> HTML {
        let patch = rollout.patch.map { key, value -> String in "\(key)=\(value.serialized(maximumLength: 60))" }.joined(separator: " ")
        let waves = rollout.progress.enumerated().map { index, wave -> HTML in
            """
            <tr><th scope="row">\(index + 1). \(wave.wave.description)</th><td class="num">\(wave.devices)</td><td class="num">\(wave.applied)</td>\
            <td class="num">\(wave.failed)</td><td class="num">\(wave.waiting)</td></tr>
            """
        }
        let devices = rollout.devices.map { device -> HTML in
            "<li><a href=\"/console/devices/\(device.device)\">\(device.device)</a> (wave \(device.wave + 1)): \(device.outcome.rawValue), \(device.detail)</li>"
        }
        var buttons: HTML = .empty
        if rollout.phase.isActive {
            let resume: HTML =
                rollout.phase == .paused
                ? """
                <form method="post" action="/console/apps/\(rollout.app)/rollout/resume"><input type="hidden" name="csrf" value="\(csrf)">\
                <button type="submit" class="primary">Resume: accept this wave, admit the next</button></form>
                """ : .empty
            buttons = """
                <div class="actions">\(resume)<form method="post" action="/console/apps/\(rollout.app)/rollout/abort"><input type="hidden" name="csrf" value="\(csrf)">\
                <button type="submit" class="danger">Abort: every device back on the previous values</button></form></div>
                """
        }
        let waveTable: HTML =
            waves.isEmpty
            ? .empty
            : """
            <div class="table-wrap"><table class="waves"><caption class="visually-hidden">Admitted waves</caption>
            <thead><tr><th scope="col">Wave</th><th scope="col">Devices</th><th scope="col">Applied</th><th scope="col">Failed</th><th scope="col">Waiting</th></tr></thead>
            <tbody>\(HTML.joined(waves))</tbody></table></div>
            """
        return """
            <section class="rollout" data-rollout="\(rollout.id)" data-phase="\(rollout.phase.rawValue)" aria-labelledby="rollout-title">
            <h2 id="rollout-title">Rollout \(rollout.id): \(rollout.phase.rawValue)</h2>
            <p>At \(rollout.scope): <code>\(patch)</code>. Wave \(rollout.currentWave + 1) of \(rollout.waves.count) \
            (\(rollout.waves.map(\.description).joined(separator: ", "))); pauses when errors pass \
            \(RolloutWave.percentText(basisPoints: rollout.pauseOnErrorsBasisPoints)), or a wave is silent for \
            \(RolloutRequest.durationText(seconds: rollout.waveWaitSeconds)). Started \(Timestamp.format(rollout.startedAt)) by \(rollout.actor)\
            \(rollout.message.isEmpty ? "" : ": \(rollout.message)").</p>
            \(rollout.reason.isEmpty ? .empty : ConsoleFrame.notice(rollout.reason, error: rollout.phase == .paused))
            \(waveTable)
            \(devices.isEmpty ? .empty : "<ul class=\"rollout-devices\">\(HTML.joined(devices))</ul>")
            \(buttons)
            </section>
            """
    }
}
