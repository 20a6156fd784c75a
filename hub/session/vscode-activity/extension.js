// GPU portal: mark when a person uses this VS Code window, for the portal's idle-session limit.
//
// VS Code's window state says "active" from a key press, click or touch in the window until about a
// minute without any (its user-activity tracker); background traffic (the tab's keep-alive) never
// makes it active. While it is, this touches ~/.gpuportal/sessions/<session key>.activity at most
// every GPUPORTAL_ACTIVITY_SECONDS (30) seconds; the session's Jupyter server reports the file's time
// (hub/session/gpuportal_session). Outside a portal session (no GPUPORTAL_SESSION_KEY) it does nothing.
"use strict";
const fs = require("fs");
const os = require("os");
const path = require("path");
const vscode = require("vscode");

function activate(context) {
  const key = process.env.GPUPORTAL_SESSION_KEY || "";
  if (!key || key.includes("/")) return;
  const file = path.join(os.homedir(), ".gpuportal", "sessions", `${key}.activity`);
  const every = Math.max(1, Number(process.env.GPUPORTAL_ACTIVITY_SECONDS) || 30) * 1000;
  let last = 0;
  const mark = () => {
    const now = Date.now();
    if (now - last < every) return;
    last = now;
    try {
      fs.mkdirSync(path.dirname(file), { recursive: true });
      fs.writeFileSync(file, "");
    } catch (error) {
      console.warn(`gpuportal-activity: cannot mark ${file}: ${error}`);
    }
  };
  context.subscriptions.push(
    vscode.window.onDidChangeWindowState((state) => {
      if (state.active) mark();
    })
  );
  const timer = setInterval(() => {
    if (vscode.window.state.active) mark();
  }, 1000);
  context.subscriptions.push({ dispose: () => clearInterval(timer) });
}

function deactivate() {}

module.exports = { activate, deactivate };
