"""Reading the agent's files: guardrails (soul), identity and skills. The only prompt-side I/O.

Everything is read once at start-up into `bot.prompt.AgentTexts`; every problem is a
`bot.config.ConfigError` that names the key or file and says how to fix it.
"""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path

from bot.config import AgentSettings
from bot.errors import ConfigError
from bot.prompt import AgentTexts, Skill

# A skill file larger than this is almost certainly a mistake (the prompt keeps at most 1 MB).
SKILL_FILE_MAX_BYTES = 4 * 1024 * 1024
SKILL_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_FRONT_MATTER_KEY = re.compile(r"^([A-Za-z_][A-Za-z0-9_-]*)\s*:\s*(.*)$")


def load_agent(settings: AgentSettings) -> AgentTexts:
    """The agent's texts, read from the files `settings` names."""
    skills = _load_skills(settings.skills_root) if settings.skills_root else ()
    known = {skill.name for skill in skills}
    for name in settings.selected_skills:
        if name not in known:
            raise missing_skill("agent.selected_skills", name, settings.skills_root, known)
    return AgentTexts(
        guardrails=_guardrails(settings.soul_path),
        identity=_identity(settings.identity_path),
        skills=skills,
        selected=tuple(dict.fromkeys(settings.selected_skills)),
    )


def missing_skill(key: str, name: str, root: Path | None, known: set[str]) -> ConfigError:
    """The error for a skill named in `key` that is not among the `known` ones."""
    return ConfigError(
        f"{key}: skill {name!r} not found under {root}. "
        f"Fix: create {name}/SKILL.md there or remove {name!r} from {key}"
        + (f" (skills found: {', '.join(sorted(known))})." if known else ".")
    )


def default_guardrails() -> str:
    return resources.files("bot.prompt").joinpath("guardrails.md").read_text(encoding="utf-8")


def _guardrails(soul_path: Path | None) -> str:
    if soul_path is None:
        return default_guardrails()
    text = _read_text(soul_path, "agent.soul_path")
    if not text.strip():
        raise ConfigError(
            f"agent.soul_path = '{soul_path}': the file is empty. Fix: write the agent's ground "
            "rules into it, or remove agent.soul_path to use the built-in ones."
        )
    return text


def _identity(identity_path: Path) -> str:
    text = _read_text(identity_path, "agent.identity_path")
    if not text.strip():
        raise ConfigError(
            f"agent.identity_path = '{identity_path}': the file is empty. Fix: describe who the "
            "agent is in it (`bot init` writes a starter IDENTITY.md)."
        )
    return text


def _read_text(path: Path, key: str) -> str:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise ConfigError(
            f"{key} = '{path}': file not found. Fix: create it or point {key} at the right file."
        ) from None
    except OSError as exc:
        raise ConfigError(
            f"{key} = '{path}': cannot be read ({exc.strerror}). Fix: check its permissions."
        ) from None
    return _decode(data, f"{key} = '{path}'")


def _decode(data: bytes, where: str) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"{where}: not valid UTF-8 (byte {exc.start}). Fix: save the file as UTF-8."
        ) from None


def _load_skills(root: Path) -> tuple[Skill, ...]:
    if not root.is_dir():
        raise ConfigError(
            f"agent.skills_root = '{root}': not a folder. Fix: create it (one <name>/SKILL.md per "
            "skill) or remove agent.skills_root."
        )
    files = sorted(p for p in root.glob("*/SKILL.md") if p.is_file())
    return tuple(_load_skill(path) for path in files)


def _load_skill(path: Path) -> Skill:
    folder = path.parent.name
    if path.stat().st_size > SKILL_FILE_MAX_BYTES:
        raise ConfigError(
            f"skill file {path}: larger than {SKILL_FILE_MAX_BYTES} bytes. Fix: shorten it (only "
            "agent.skill_max_bytes of it reaches the model anyway)."
        )
    text = _decode(path.read_bytes(), f"skill file {path}")
    fields, body = parse_front_matter(text, path)
    name = fields.get("name", "").strip()
    description = fields.get("description", "").strip()
    if not name or not description:
        missing = "name" if not name else "description"
        raise ConfigError(
            f"skill file {path}: the front matter has no `{missing}`. Fix: start the file with\n"
            f"---\nname: {folder}\ndescription: what the skill is for, in one line\n---"
        )
    if name != folder or not SKILL_NAME.match(name):
        raise ConfigError(
            f"skill file {path}: front matter name {name!r} must equal its folder name "
            f"{folder!r} and use only letters, digits, '.', '_' and '-'. Fix: rename one of them."
        )
    if not body.strip():
        raise ConfigError(
            f"skill file {path}: no instructions after the front matter. Fix: add them."
        )
    return Skill(name=name, description=" ".join(description.split()), body=body.strip())


def parse_front_matter(text: str, path: Path) -> tuple[dict[str, str], str]:
    """Split `---`-fenced `key: value` lines from the body. Values may be quoted; one line each."""
    lines = text.splitlines()
    if not lines or lines[0].strip() != "---":
        raise ConfigError(
            f"skill file {path}: does not start with front matter. Fix: put `---`, then "
            "`name: ...` and `description: ...` lines, then `---` at the top of the file."
        )
    try:
        end = next(i for i in range(1, len(lines)) if lines[i].strip() == "---")
    except StopIteration:
        raise ConfigError(
            f"skill file {path}: the front matter is never closed. Fix: add a `---` line after "
            "the description."
        ) from None
    fields: dict[str, str] = {}
    for number, line in enumerate(lines[1:end], start=2):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        match = _FRONT_MATTER_KEY.match(line)
        if match is None:
            raise ConfigError(
                f"skill file {path}, line {number}: {line.strip()[:60]!r} is not `key: value`. "
                "Fix: write each front matter field on one line as `key: value`."
            )
        fields[match.group(1)] = _unquote(match.group(2).strip())
    return fields, "\n".join(lines[end + 1 :])


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1]
    return value
