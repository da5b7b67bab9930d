# "Do the tasks on my TODO list", for Alice. The list is the task's input
# (--input data/todo.txt): payments, each over the threshold at which Alice
# says yes herself. Asking her once per payment is what makes people stop
# reading; instead the agent submits its plan (every payment it intends,
# exactly) and she approves it once, having read it whole. Each payment of
# the plan is then made once without another question; anything else the
# agent tries is asked about on its own, and she did not expect a question.
task "todo" {
  module    = var.agent # "honest" or "hijacked": the same manifest for both agents
  principal = "alice"
  limits {
    memory  = "64MiB"
    timeout = "60s"
  }

  cap "net" "payments" {
    origin        = var.bank
    methods       = ["POST"]
    paths         = ["/payments"]
    max_uses      = 5                            # a week's TODO list, and no more
    approve_when  = "request.method == 'POST'"   # every payment needs Alice's yes...
    approve_plans = true                         # ...or an item of a plan she approved
    audit         = true
    allow_private = true # the example's bank listens on loopback
  }
}
