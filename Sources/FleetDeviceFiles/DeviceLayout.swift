/// Where the agent's files are on a device (DESIGN.md, "On the device").
///
/// ```
/// <stateDirectory>/identity.json                     device id and token, 0600
/// <stateDirectory>/enrollment-request.json           the request id of an enrollment under way, 0600
/// <stateDirectory>/apps/<app>/settings.json          what apps read (0640, group = the app's readers)
/// <stateDirectory>/apps/<app>/settings.previous.json the generation before it
/// <stateDirectory>/apps/<app>/metadata.json          the metadata the settings were validated with (+ .previous)
/// <stateDirectory>/apps/<app>/status.json            revision, state, last sync, last error (0640, readers)
/// <stateDirectory>/apps/<app>/reports.json           status reports not yet delivered to the server
/// <inboxDirectory>/<app>/                            the local inbox
/// ```
public struct DeviceLayout: Sendable, Equatable {
    public var stateDirectory: String
    public var inboxDirectory: String

    public init(stateDirectory: String, inboxDirectory: String) {
        self.stateDirectory = stateDirectory
        self.inboxDirectory = inboxDirectory
    }

    /// `identity.json`: the device id and token.
    public var identityFile: String { stateDirectory + "/identity.json" }

    /// `enrollment-request.json`: the request id of an enrollment that has not got its answer
    /// yet, so that a retry after a lost answer (a stop, a full disk, a dropped connection)
    /// gets the same device from the server.
    public var enrollmentRequestFile: String { stateDirectory + "/enrollment-request.json" }

    /// The folder of every app's folder.
    public var appsDirectory: String { stateDirectory + "/apps" }

    /// The folder of one app's files.
    public func appDirectory(_ app: String) -> String { appsDirectory + "/" + app }

    /// The settings file apps read, and the generation before it.
    public func settingsFile(_ app: String) -> GenerationFile {
        GenerationFile(path: appDirectory(app) + "/settings.json", previousPath: appDirectory(app) + "/settings.previous.json")
    }

    /// The metadata document the settings were validated with, and the one before it.
    public func metadataFile(_ app: String) -> GenerationFile {
        GenerationFile(path: appDirectory(app) + "/metadata.json", previousPath: appDirectory(app) + "/metadata.previous.json")
    }

    /// `settings.sha256`: the SHA-256 of the `settings.json` the agent wrote last (two during a
    /// write), so that it knows its own file from one edited by hand, across restarts too.
    public func writtenSettingsRecord(_ app: String) -> String { appDirectory(app) + "/settings.sha256" }

    /// `status.json`: what `fleetset status` shows.
    public func statusFile(_ app: String) -> String { appDirectory(app) + "/status.json" }

    /// `reports.json`: status reports waiting to be delivered.
    public func reportsFile(_ app: String) -> String { appDirectory(app) + "/reports.json" }

    /// `changes.json`: the device's own changes, queued and ended (see ``ChangeJournal``).
    public func changesFile(_ app: String) -> String { appDirectory(app) + "/changes.json" }

    /// `facts.json`: the app's own device facts (``FleetProtocol/DeviceInfo``, under `apps`).
    public func appFactsFile(_ app: String) -> String { appDirectory(app) + "/facts.json" }

    /// `device-info.json`: the device facts the server has taken, and for which device.
    public var deviceInfoFile: String { stateDirectory + "/device-info.json" }

    /// `policy.json`: the server's agent policy, its tag, and the policy as settled with the
    /// configuration file's pins (what `fleetset status` shows).
    public var policyFile: String { stateDirectory + "/policy.json" }

    /// The app's inbox folder.
    public func inboxDirectory(_ app: String) -> String { inboxDirectory + "/" + app }
}
