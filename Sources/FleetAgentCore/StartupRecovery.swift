import FleetDeviceState

/// What the agent finishes at start-up for a revision it wrote before it stopped.
public enum StartupRecovery {
    /// Whether the outcome of the settings on disk is still open: the agent wrote
    /// `settings.json` and stopped (a crash, a power cut, a restart) before its hook ran and its
    /// report was sent or queued, which it records in `status.json` last. Then it runs the hook
    /// and reports again (hooks must be idempotent; the server takes a repeated report as is).
    public static func needsCompletion(settings: DeviceSettings?, status: AppStatus?) -> Bool {
        guard let settings else { return false }
        guard let status else { return true }
        return status.revision != settings.revision || status.schemaVersion != settings.schemaVersion
    }
}
