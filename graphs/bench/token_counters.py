"""``taskctx tokens [DIR]``: the token counters measured against o200k_base, per text and in total."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

from context.tokens import TokenCounter, encoding_counter, estimate_tokens

from .defaults import DEFAULT_DIR, trajectory_files

__all__ = ["SAMPLES", "CounterRatio", "corpus", "measure"]

#: CJK, Japanese, Korean and emoji text (written for this measure; natural sentences of the
#: kind tool outputs and requests hold)
SAMPLES = {
    "sample:zh": (
        "在多对多字段中，如果传入了对称参数，或者这是一个自引用的多对多关系，目标模型上就不会创建相关字段。"
        "然而，如果开发者不了解这一点而传入了相关名称，他们可能会感到困惑，直到找到关于对称关系的说明。"
        "因此，建议在这种情况下定义多对多字段时抛出一个错误。测试运行了三百二十个用例，其中两个失败："
        "第一个失败是因为配置文件中缺少数据库连接字符串，第二个失败是因为时区设置与服务器不一致。"
        "请检查日志文件，修复这两个问题，然后重新运行完整的测试套件。代码审查人员要求每个函数都有清晰的文档字符串，"
        "说明参数的类型、返回值的单位以及可能抛出的异常。"
    ),
    "sample:ja": (
        "対称的な多対多フィールドで関連名を定義できないようにします。開発者がこの事実を理解せずに関連名を渡すと、"
        "対称関係についての説明を見つけるまで混乱する可能性があります。そのため、この条件でフィールドを定義した場合は"
        "エラーを発生させることを提案します。テストは三百二十件実行され、そのうち二件が失敗しました。"
        "ログファイルを確認して、設定ファイルのデータベース接続文字列とタイムゾーンの設定を修正してください。"
        "カタカナのコンピュータ用語、例えばデータベース、サーバー、キャッシュ、トークン、プロンプトも含めます。"
    ),
    "sample:ko": (
        "대칭 다대다 필드에서 관련 이름을 정의하지 못하도록 합니다. "
        "개발자가 이 사실을 이해하지 못하고 관련 이름을 "
        "전달하면 대칭 관계에 대한 설명을 찾을 때까지 혼란스러울 수 있습니다. "
        "따라서 이 조건에서 필드를 정의하면 오류를 "
        "발생시키는 것을 제안합니다. 테스트는 삼백이십 개가 실행되었고 그중 두 개가 실패했습니다. 로그 파일을 확인하고 "
        "설정 파일의 데이터베이스 연결 문자열과 시간대 설정을 수정한 다음 전체 테스트를 다시 실행하세요."
    ),
    "sample:emoji": (
        "Build ✅ passed 🎉🎉 but deploy ❌ failed 😱 — see 👉 logs 📄. Team: 👨‍👩‍👧‍👦 👩🏽‍💻 🧑🏿‍🔬 🏳️‍🌈 🇯🇵 🇰🇷 🇨🇳 🇺🇸. "
        "Weather ☀️🌧️⛈️❄️ 🔥🔥🔥 💯 🚀 ❤️ 🧡 💛 💚 💙 💜 🖤 🤍 🤎 👍🏻👍🏼👍🏽👍🏾👍🏿 🙏 🤖 🦀 🐍 ⚠️ ⛔ ♻️ ⏰ ⌛ 🕐"
    ),
}
MIN_CHARS = 200


def _approx(text: str) -> int:
    return math.ceil(len(text) / 4)


COUNTERS: dict[str, TokenCounter] = {
    "estimate": estimate_tokens,
    "cl100k_base": lambda text: encoding_counter("cl100k_base")(text),  # (loaded on first use)
    "4 chars a token": _approx,
}


@dataclass
class CounterRatio:
    """One counter against o200k over a set of texts.

    ``tokens`` and ``o200k`` in all, the lowest and highest per-text ratio and where each was found.
    """

    counter: str
    texts: int
    tokens: int
    o200k: int
    lowest: float
    lowest_at: str
    highest: float
    highest_at: str

    @property
    def total(self) -> float:
        """The ratio over all texts together: ``tokens / o200k``."""
        return self.tokens / self.o200k


def corpus(dir: str | Path = DEFAULT_DIR) -> list[tuple[str, str]]:
    """The texts to measure on: every trajectory text of at least :data:`MIN_CHARS` characters, then :data:`SAMPLES`.

    Args:
        dir: The folder of recorded runs.

    Returns:
        ``(where, text)`` pairs, ``where`` as ``<file>:<step>:<field>``.

    Raises:
        FileNotFoundError: ``dir`` does not exist, or a ``*.jsonl`` in it is a broken link.
    """
    d = Path(dir)
    if not d.is_dir():
        raise FileNotFoundError(f"{d} is not a folder of trajectories (*.jsonl)")
    out = []
    for f in trajectory_files(d):
        for n, line in enumerate(f.read_text(encoding="utf-8").splitlines()):
            row = json.loads(line)
            for k in ("task", "thought", "action", "observation"):
                v = row.get(k)
                if isinstance(v, str) and len(v) >= MIN_CHARS:
                    out.append((f"{f.name}:{n}:{k}", v))
    out.extend(SAMPLES.items())
    return out


def measure(texts: list[tuple[str, str]]) -> list[CounterRatio]:
    """Each of :data:`COUNTERS` against o200k_base over ``texts``.

    Args:
        texts: ``(where, text)`` pairs (:func:`corpus`).

    Returns:
        One ratio per counter.
    """
    o200k = encoding_counter("o200k_base")
    truth = [o200k(t) for _, t in texts]
    out = []
    for name, count in COUNTERS.items():
        got = [count(t) for _, t in texts]
        ratios = [(g / max(o, 1), w) for g, o, (w, _) in zip(got, truth, texts)]
        lo, hi = min(ratios), max(ratios)
        out.append(CounterRatio(name, len(texts), sum(got), sum(truth), lo[0], lo[1], hi[0], hi[1]))
    return out
