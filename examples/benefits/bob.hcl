# The benefits desk, run for bob: the cap grants "the principal's own
# benefits record", so the same tool reads bob's record and nobody else's.
task "benefits-bob" {
  module    = "guest"
  principal = "bob"

  seed "benefits" {
    file = "data/benefits.json"
  }

  cap "data" "benefits" {
    collection = "benefits"
    records    = "own"
    fields     = ["plan", "dental", "vision", "deductible_left"]
    ops        = ["read", "query"]
  }
}
