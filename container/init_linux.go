package container

// MaybeInit runs the sandbox init when this process was re-executed as one.
func MaybeInit() {}
