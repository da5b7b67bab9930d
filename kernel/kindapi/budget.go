package kindapi

import "fmt"

// ParseBudget reads a budget for a grant of kind (registered or not: mandate
// check uses it without a kernel) in its unit for scope s.
func ParseBudget(kind Kind, s Scope, text string) (int64, error) {
	u := kind.Info().Amounts
	if u == nil {
		return 0, fmt.Errorf("a %s capability has no amounts to budget (max_uses bounds its uses)", kind.Name())
	}
	n, err := u.ParseAmount(s, text)
	if err != nil {
		return 0, err
	}
	if n <= 0 {
		return 0, fmt.Errorf("budget %q must be positive", text)
	}
	return n, nil
}
