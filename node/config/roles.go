package config

// Roles, the set of roles a principal is granted, and their names.

import (
	"strings"

	"github.com/cockroachdb/errors"
)

// Roles is a set of the roles a [[principals]] entry grants (its roles key,
// docs/configuration.md). Each Role… constant is a set of one role. The zero
// value grants nothing.
type Roles uint8

// The roles. Invoke calls routes of the principal's tenant; deploy uploads
// artifacts and activates or deletes releases of the principal's tenant;
// admin reads node-wide state (the node admission snapshot).
const (
	RoleInvoke Roles = 1 << iota
	RoleDeploy
	RoleAdmin
)

var roleNames = [...]struct {
	role Roles
	name string
}{{RoleInvoke, "invoke"}, {RoleDeploy, "deploy"}, {RoleAdmin, "admin"}}

// ParseRole parses one configuration name: "invoke", "deploy" or "admin".
func ParseRole(s string) (Roles, error) {
	for _, r := range roleNames {
		if r.name == s {
			return r.role, nil
		}
	}
	return 0, errors.New(`unknown role (want "invoke", "deploy" or "admin")`)
}

// Has reports whether every role of want is in r. Has(0) is false: asking
// for no role is a programming error, not a grant.
func (r Roles) Has(want Roles) bool { return want != 0 && r&want == want }

// String lists the roles by name, comma-separated, in the fixed order
// invoke, deploy, admin ("" for none).
func (r Roles) String() string {
	var names []string
	for _, n := range roleNames {
		if r&n.role != 0 {
			names = append(names, n.name)
		}
	}
	return strings.Join(names, ",")
}
