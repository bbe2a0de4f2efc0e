#!/usr/bin/env node
// One Claude Agent SDK query per process, for jarvis's `claude_code` agent.
//
// stdin:  one JSON request (see README.md), read to its end (bounded).
// stdout: one JSON event per line while the query runs, then the final block:
//           ---OPENJARVIS_OUTPUT_START---
//           {"content": ..., "session_id": ..., ...}
//           ---OPENJARVIS_OUTPUT_END---
//         Nothing else is ever written to stdout; diagnostics go to stderr (bounded).
// exit:   0 success, 1 runtime error (the final block says is_error), 2 bad input.
//
// SIGTERM / SIGINT abort the query (the SDK then stops its CLI child) and the runner
// exits promptly with an error block, so a caller's timeout never leaves a process behind.

import { mkdirSync, statSync } from "node:fs";
import { isAbsolute, join } from "node:path";

const START = "---OPENJARVIS_OUTPUT_START---";
const END = "---OPENJARVIS_OUTPUT_END---";
const MAX_REQUEST_BYTES = 4 * 1024 * 1024;
const MAX_TOOL_CONTENT_BYTES = 64 * 1024;
const MAX_STDERR_BYTES = 64 * 1024;
const ABORT_GRACE_MS = 5000; // the SDK gives its CLI 2 s to exit on its own, then SIGTERM
const PERMISSION_MODES = ["default", "acceptEdits", "bypassPermissions", "plan", "dontAsk"];

class InputError extends Error {}

let stderrBudget = MAX_STDERR_BYTES;
/** Diagnostics to stderr, at most MAX_STDERR_BYTES in all: a chatty CLI cannot flood the caller. */
function log(text) {
    if (stderrBudget <= 0) return;
    let line = String(text);
    if (!line.endsWith("\n")) line += "\n";
    const bytes = Buffer.from(line, "utf8");
    if (bytes.length > stderrBudget) {
        process.stderr.write(bytes.subarray(0, Math.max(0, stderrBudget - 40)).toString("utf8"));
        process.stderr.write("\n[runner: further diagnostics dropped]\n");
        stderrBudget = 0;
        return;
    }
    stderrBudget -= bytes.length;
    process.stderr.write(bytes);
}

/** Writes one protocol line; process.stdout is synchronous for files and pipes on Linux. */
function emit(obj) {
    process.stdout.write(JSON.stringify(obj) + "\n");
}

function capBytes(text, limit) {
    const bytes = Buffer.from(text, "utf8");
    if (bytes.length <= limit) return text;
    // cut on a character boundary: decoding a prefix may end in a replacement char, drop it
    return bytes.subarray(0, limit).toString("utf8").replace(/\uFFFD$/, "") + "\n[truncated]";
}

/** Reads stdin to its end, refusing more than MAX_REQUEST_BYTES. */
function readStdin() {
    return new Promise((resolve, reject) => {
        const chunks = [];
        let size = 0;
        process.stdin.on("data", (chunk) => {
            size += chunk.length;
            if (size > MAX_REQUEST_BYTES) {
                reject(new InputError(`request larger than ${MAX_REQUEST_BYTES} bytes`));
                process.stdin.destroy();
                return;
            }
            chunks.push(chunk);
        });
        process.stdin.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
        process.stdin.on("error", (err) => reject(new InputError(`reading stdin: ${err.message}`)));
    });
}

function requireField(request, name, check, what) {
    if (!Object.prototype.hasOwnProperty.call(request, name)) {
        throw new InputError(`missing field "${name}"`);
    }
    const value = request[name];
    if (!check(value)) throw new InputError(`field "${name}" must be ${what}`);
    return value;
}

const isString = (v) => typeof v === "string";

function isDirectory(path) {
    try {
        return statSync(path).isDirectory();
    } catch {
        return false;
    }
}

/** The validated request: every field of the protocol present and of its type. */
function parseRequest(text) {
    if (text.trim() === "") throw new InputError("no request on stdin (closed before a JSON object)");
    let request;
    try {
        request = JSON.parse(text);
    } catch (err) {
        throw new InputError(`the request is not JSON: ${err.message}`);
    }
    if (request === null || typeof request !== "object" || Array.isArray(request)) {
        throw new InputError("the request must be a JSON object");
    }
    const prompt = requireField(request, "prompt", (v) => isString(v) && v.trim() !== "", "a non-empty string");
    const apiKey = requireField(request, "api_key", isString, "a string");
    const baseUrl = requireField(request, "base_url", (v) => isString(v) && (v === "" || /^https?:\/\/\S+$/.test(v)), 'an http(s) URL or ""');
    const workspace = requireField(request, "workspace", (v) => isString(v) && isAbsolute(v), "an absolute path");
    if (!isDirectory(workspace)) throw new InputError(`workspace ${workspace} is not a directory`);
    const allowedTools = requireField(request, "allowed_tools", (v) => Array.isArray(v) && v.every((t) => isString(t) && t !== ""), "a list of tool names");
    const systemPrompt = requireField(request, "system_prompt", isString, "a string");
    const sessionId = requireField(request, "session_id", (v) => isString(v) && /^[A-Za-z0-9-]{0,128}$/.test(v), 'a session id or ""');
    const model = requireField(request, "model", isString, "a string");
    const maxTurns = requireField(request, "max_turns", (v) => Number.isInteger(v) && v >= 1 && v <= 10000, "an integer from 1 to 10000");
    const permissionMode = requireField(request, "permission_mode", (v) => PERMISSION_MODES.includes(v), `one of ${PERMISSION_MODES.join(", ")}`);
    const configDir = requireField(request, "config_dir", (v) => isString(v) && isAbsolute(v), "an absolute path");
    requireField(request, "mcp_servers", isPlainObject, "an object of NAME: {command, args, env}");
    const mcpServers = parseMcpServers(request.mcp_servers);
    return { prompt, apiKey, baseUrl, workspace, allowedTools, systemPrompt, sessionId, model, maxTurns, permissionMode, configDir, mcpServers };
}

const MCP_SERVER_NAME = /^[A-Za-z0-9_-]{1,64}$/;
const MAX_MCP_SERVERS = 64;

function isPlainObject(v) {
    return v !== null && typeof v === "object" && !Array.isArray(v);
}

/** `mcp_servers`: stdio MCP servers as the SDK's `mcpServers` ({} none). */
function parseMcpServers(value) {
    if (!isPlainObject(value)) throw new InputError("mcp_servers must be an object of NAME: {command, args, env}");
    const entries = Object.entries(value);
    if (entries.length > MAX_MCP_SERVERS) throw new InputError(`mcp_servers holds more than ${MAX_MCP_SERVERS} servers`);
    const servers = {};
    for (const [name, spec] of entries) {
        if (!MCP_SERVER_NAME.test(name)) throw new InputError("mcp_servers: a server name must be 1 to 64 letters, digits, _ or -");
        if (!isPlainObject(spec)) throw new InputError(`mcp_servers.${name} must be an object`);
        if (!isString(spec.command) || spec.command === "") throw new InputError(`mcp_servers.${name}.command must be a non-empty string`);
        const args = spec.args ?? [];
        if (!Array.isArray(args) || !args.every(isString)) throw new InputError(`mcp_servers.${name}.args must be a list of strings`);
        const env = spec.env ?? {};
        if (!isPlainObject(env) || !Object.values(env).every(isString)) throw new InputError(`mcp_servers.${name}.env must map names to strings`);
        servers[name] = { type: "stdio", command: spec.command, args, env };
    }
    return servers;
}

/**
 * The CLI's whole environment: options.env replaces the runner's, so nothing of the caller's
 * leaks in (no cloud key, no HOME) beyond PATH; all its state lands in config_dir.
 */
function cliEnvironment(req) {
    // private to the user: sessions hold the whole conversation, tool output included
    mkdirSync(req.configDir, { recursive: true, mode: 0o700 });
    const tmp = join(req.configDir, "tmp");
    mkdirSync(tmp, { recursive: true, mode: 0o700 });
    const env = {
        PATH: process.env.PATH || "/usr/local/bin:/usr/bin:/bin",
        ANTHROPIC_API_KEY: req.apiKey,
        CLAUDE_CONFIG_DIR: req.configDir,
        HOME: req.configDir,
        TMPDIR: tmp,
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
        CLAUDE_CODE_MAX_RETRIES: "1",
        DISABLE_AUTOUPDATER: "1",
    };
    if (req.baseUrl !== "") env.ANTHROPIC_BASE_URL = req.baseUrl;
    return env;
}

function queryOptions(req, abortController) {
    const options = {
        abortController,
        cwd: req.workspace,
        env: cliEnvironment(req),
        maxTurns: req.maxTurns,
        permissionMode: req.permissionMode,
        settingSources: [],
        thinking: { type: "disabled" },
        includePartialMessages: true,
        stderr: (data) => log(`[claude] ${data}`),
    };
    if (req.permissionMode === "bypassPermissions") options.allowDangerouslySkipPermissions = true;
    if (req.model !== "") options.model = req.model;
    if (req.allowedTools.length > 0) {
        options.allowedTools = req.allowedTools;
        options.tools = req.allowedTools;
    }
    // A string keeps the SDK's own short preamble and adds the persona after it. The SDK's
    // "append" form exists only on the claude_code preset, which would swap that preamble for
    // the full Claude Code prompt: with and without a persona the prompt would differ wholesale.
    if (req.systemPrompt !== "") options.systemPrompt = req.systemPrompt;
    if (req.sessionId !== "") options.resume = req.sessionId;
    if (Object.keys(req.mcpServers).length > 0) options.mcpServers = req.mcpServers;
    return options;
}

/** A tool result's content as text: text blocks joined, other blocks named. */
function flattenContent(content) {
    if (typeof content === "string") return content;
    if (!Array.isArray(content)) return content == null ? "" : JSON.stringify(content);
    return content
        .map((block) => {
            if (block && block.type === "text") return String(block.text ?? "");
            return `[${block && block.type ? block.type : "content"}]`;
        })
        .join("\n");
}

function finalBlock(state, fields) {
    return {
        content: state.content,
        session_id: state.sessionId,
        num_turns: state.numTurns,
        usage: { input_tokens: state.inputTokens, output_tokens: state.outputTokens },
        tool_results: state.toolResults,
        is_error: false,
        subtype: "success",
        error: "",
        ...fields,
    };
}

let printed = false;
/** The final block, written once: a late abort path never adds a second one. */
function printFinal(block) {
    if (printed) return;
    printed = true;
    process.stdout.write(`${START}\n${JSON.stringify(block)}\n${END}\n`);
}

/** Folds one SDK message into the run's state and emits the events it carries. */
function handleMessage(message, state) {
    switch (message.type) {
        case "system":
            if (message.subtype === "init" && message.session_id) {
                state.sessionId = message.session_id;
                emit({ type: "session", session_id: message.session_id });
            }
            return;
        case "stream_event": {
            const event = message.event;
            if (event && event.type === "content_block_delta" && event.delta && event.delta.type === "text_delta") {
                const text = String(event.delta.text ?? "");
                if (text !== "" && message.parent_tool_use_id == null) emit({ type: "text_delta", text });
            }
            return;
        }
        case "assistant": {
            const blocks = Array.isArray(message.message?.content) ? message.message.content : [];
            const texts = [];
            for (const block of blocks) {
                if (block.type === "text") texts.push(String(block.text ?? ""));
                if (block.type === "tool_use") {
                    const input = block.input && typeof block.input === "object" ? block.input : {};
                    state.toolUses.set(block.id, { name: String(block.name), input });
                    emit({ type: "tool_use", id: String(block.id), name: String(block.name), input });
                }
            }
            if (texts.length > 0 && message.parent_tool_use_id == null) state.lastText = texts.join("");
            return;
        }
        case "user": {
            const blocks = Array.isArray(message.message?.content) ? message.message.content : [];
            for (const block of blocks) {
                if (block.type !== "tool_result") continue;
                const id = String(block.tool_use_id);
                const content = capBytes(flattenContent(block.content), MAX_TOOL_CONTENT_BYTES);
                const isError = block.is_error === true;
                emit({ type: "tool_result", tool_use_id: id, content, is_error: isError });
                const use = state.toolUses.get(id) ?? { name: "", input: {} };
                state.toolResults.push({ tool_name: use.name, tool_use_id: id, input: use.input, content, is_error: isError });
            }
            return;
        }
        case "result": {
            state.result = message;
            if (message.session_id) state.sessionId = message.session_id;
            state.numTurns = Number.isInteger(message.num_turns) ? message.num_turns : state.numTurns;
            const usage = message.usage ?? {};
            const count = (v) => (Number.isFinite(v) && v > 0 ? Math.trunc(v) : 0);
            // every input token the model read, cached or not
            state.inputTokens = count(usage.input_tokens) + count(usage.cache_read_input_tokens) + count(usage.cache_creation_input_tokens);
            state.outputTokens = count(usage.output_tokens);
            return;
        }
        default:
            return;
    }
}

async function run(req, signals) {
    const { query } = await import("@anthropic-ai/claude-agent-sdk");
    const state = {
        sessionId: req.sessionId,
        content: "",
        lastText: "",
        numTurns: 0,
        inputTokens: 0,
        outputTokens: 0,
        toolUses: new Map(),
        toolResults: [],
        result: null,
    };
    const abortController = signals.controller;
    let failure = null;
    try {
        const stream = query({ prompt: req.prompt, options: queryOptions(req, abortController) });
        for await (const message of stream) {
            handleMessage(message, state);
            if (signals.received) break;
        }
    } catch (err) {
        failure = err;
    }
    const result = state.result;
    if (signals.received) {
        state.content = result ? String(result.result ?? state.lastText) : state.lastText;
        return { code: 1, block: finalBlock(state, { is_error: true, subtype: "error_runtime", error: `interrupted by ${signals.received}` }) };
    }
    if (result) {
        const isError = result.is_error === true || result.subtype !== "success";
        state.content = typeof result.result === "string" ? result.result : state.lastText;
        let error = "";
        if (isError) {
            const errors = Array.isArray(result.errors) ? result.errors.map(String) : [];
            error = errors.join("; ") || state.content || result.subtype;
        }
        return { code: isError ? 1 : 0, block: finalBlock(state, { is_error: isError, subtype: String(result.subtype), error: capBytes(error, MAX_TOOL_CONTENT_BYTES) }) };
    }
    state.content = state.lastText;
    const reason = failure ? (failure.message || String(failure)) : "the SDK ended without a result";
    if (failure) log(`runner: ${failure.stack || failure}`);
    return { code: 1, block: finalBlock(state, { is_error: true, subtype: "error_runtime", error: capBytes(reason, MAX_TOOL_CONTENT_BYTES) }) };
}

async function main() {
    const signals = { controller: new AbortController(), received: "" };
    let finished = false;
    const onSignal = (name) => {
        if (signals.received) return;
        signals.received = name;
        log(`runner: ${name}, aborting the query`);
        signals.controller.abort();
        // the SDK stops its CLI child on abort; if the loop does not end soon, end anyway
        setTimeout(() => {
            if (finished) return;
            printFinal(finalBlock({ content: "", sessionId: "", numTurns: 0, inputTokens: 0, outputTokens: 0, toolResults: [] }, { is_error: true, subtype: "error_runtime", error: `interrupted by ${name}` }));
            process.exit(1);
        }, ABORT_GRACE_MS).unref();
    };
    process.on("SIGTERM", () => onSignal("SIGTERM"));
    process.on("SIGINT", () => onSignal("SIGINT"));
    // a reader that went away must not turn into an unhandled EPIPE
    process.stdout.on("error", () => process.exit(1));

    let req;
    try {
        req = parseRequest(await readStdin());
    } catch (err) {
        const message = err instanceof InputError ? err.message : `bad input: ${err}`;
        printFinal(finalBlock({ content: "", sessionId: "", numTurns: 0, inputTokens: 0, outputTokens: 0, toolResults: [] }, { is_error: true, subtype: "error_input", error: message }));
        finished = true;
        process.exit(2);
    }
    if (signals.received) {
        printFinal(finalBlock({ content: "", sessionId: "", numTurns: 0, inputTokens: 0, outputTokens: 0, toolResults: [] }, { is_error: true, subtype: "error_runtime", error: `interrupted by ${signals.received}` }));
        process.exit(1);
    }
    let outcome;
    try {
        outcome = await run(req, signals);
    } catch (err) {
        log(`runner: ${err && err.stack ? err.stack : err}`);
        outcome = { code: 1, block: finalBlock({ content: "", sessionId: req.sessionId, numTurns: 0, inputTokens: 0, outputTokens: 0, toolResults: [] }, { is_error: true, subtype: "error_runtime", error: capBytes(String(err && err.message ? err.message : err), MAX_TOOL_CONTENT_BYTES) }) };
    }
    finished = true;
    printFinal(outcome.block);
    process.exit(outcome.code);
}

main();
