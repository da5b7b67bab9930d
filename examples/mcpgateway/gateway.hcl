# The MCP servers Alice already runs, behind Mandate: `mandate mcp serve
# gateway.hcl` offers her MCP client (Claude Desktop, VS Code, ...) three
# tools of two upstream servers, each call a call on the tool's mcp
# capability through the kernel's pipeline:
#
#   read_report  the files server's read_text_file, inside reports/ only;
#                its results are labelled pii:alice
#   list_reports the files server's list_directory, of reports/ only
#   web_search   the public search server's search: no clearance, so
#                nothing labelled pii:alice may reach it
#
# and not the files server's write_file: no tool offers it, no grant allows
# it. Each tool's definition is pinned by digest: `mandate check gateway.hcl
# --pins` prints the definitions and the pins block to paste in each cap
# "mcp" block (see the README). This file has none yet.
#
#   mandate check gateway.hcl --pins --var files_server=... --var alice=... --var search=...
#   mandate mcp serve gateway.hcl --var files_server=... --var alice=... --var search=...
#
# `go run ./examples/mcpgateway` starts stand-ins for both servers (the
# files server is that program, started again with serve-files; the search
# server listens on loopback), pins a copy of this file and plays a
# session. allow_private = true is there for the loopback stand-in: drop it
# for a public server. With the real filesystem server, command is
#
#   command = ["npx", "-y", "@modelcontextprotocol/server-filesystem@2026.8.31", "/home/alice"]
#   env     = ["PATH", "HOME"]
#
# and that server runs OUTSIDE the WebAssembly sandbox with the rights of
# the user running mandate: the capability mediates what passes through it,
# not what the process does on its own.
session {
  principal = "alice"
  clearance = ["pii:alice"] # the most the client's model may ever be shown
}

tool "read_report" {
  upstream = "read_text_file" # no description: the client is shown the pinned one

  cap "mcp" "files" {
    command   = [var.files_server, "serve-files", var.alice]
    tools     = ["read_text_file"]
    results   = { read_text_file = { labels = ["pii:alice"], taint = "fs:alice" } }
    clearance = ["pii:alice"] # her reports' paths may be sent to her own server
    when      = "args.path.startsWith('${var.alice}/reports/') && !args.path.contains('..')"
  }
}

tool "list_reports" {
  upstream    = "list_directory"
  description = "List Alice's reports: path is the reports folder."

  cap "mcp" "files" {
    command   = [var.files_server, "serve-files", var.alice] # the same server: one process for both
    tools     = ["list_directory"]
    results   = { list_directory = { labels = ["pii:alice"], taint = "fs:alice" } }
    clearance = ["pii:alice"]
    when      = "args.path == '${var.alice}/reports'"
  }
}

tool "web_search" {
  upstream    = "search"
  description = "Search the public web."

  cap "mcp" "search" {
    url           = var.search
    allow_private = true
    tools         = ["search"]
    # no clearance: a public sink, so nothing labelled pii:alice may reach it
  }
}
