package protocol

// CheckVersion returns VERSION_UNSUPPORTED (listing the supported versions) unless v is
// MAJOR.MINOR with a supported MAJOR. Receivers call it before anything else: another MAJOR
// may sign differently.
func CheckVersion(v string) error { return checkVersion(v) }
