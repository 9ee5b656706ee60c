"""Workloads for the ground-truth runs: models, synthetic batches and datasets.

Every workload is small but real: the full ResNet-50, a GPT-2-small-like
decoder and a DLRM-like embedding + MLP model, trained on synthetic data
(nothing is downloaded). See docs/internals/ground-truth.md.
"""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import Dataset

# ---------------------------------------------------------------- ResNet-50


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, inplanes, planes, stride=1, downsample=None):
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = nn.Conv2d(planes, planes * 4, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(planes * 4)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = downsample

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return self.relu(out + identity)


class LocalResNet50(nn.Module):
    """torchvision's ResNet-50 layout (v1.5: stride in the 3x3 conv)."""

    def __init__(self, num_classes=1000):
        super().__init__()
        self.inplanes = 64
        self.conv1 = nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, stride=2, padding=1)
        self.layer1 = self._layer(64, 3)
        self.layer2 = self._layer(128, 4, stride=2)
        self.layer3 = self._layer(256, 6, stride=2)
        self.layer4 = self._layer(512, 3, stride=2)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(2048, num_classes)

    def _layer(self, planes, blocks, stride=1):
        down = None
        if stride != 1 or self.inplanes != planes * 4:
            down = nn.Sequential(nn.Conv2d(self.inplanes, planes * 4, 1, stride=stride, bias=False),
                                 nn.BatchNorm2d(planes * 4))
        layers = [Bottleneck(self.inplanes, planes, stride, down)]
        self.inplanes = planes * 4
        layers += [Bottleneck(self.inplanes, planes) for _ in range(1, blocks)]
        return nn.Sequential(*layers)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def resnet50_model():
    """torchvision's resnet50 when it is installed, else the local copy."""
    try:
        import torchvision

        try:
            return torchvision.models.resnet50(weights=None), "torchvision"
        except TypeError:  # torchvision < 0.13
            return torchvision.models.resnet50(pretrained=False), "torchvision"
    except ImportError:
        return LocalResNet50(), "local"


class SyntheticImages(Dataset):
    """ImageNet-shaped samples made on the CPU with real per-sample work.

    Each sample is a deterministic random 3x256x256 uint8 image, randomly
    cropped to 224, flipped, converted to float, blurred `blur` times with a
    3x3 box filter and normalized: the kind of CPU work a real input pipeline
    does after decoding, so DataLoader workers matter.
    """

    MEAN = torch.tensor([0.485, 0.456, 0.406]).view(3, 1, 1)
    STD = torch.tensor([0.229, 0.224, 0.225]).view(3, 1, 1)

    def __init__(self, length=1 << 20, blur=2):
        self.length = length
        self.blur = blur

    def __len__(self):
        return self.length

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        img = torch.randint(0, 256, (3, 256, 256), dtype=torch.uint8, generator=g)
        y, x = torch.randint(0, 33, (2,), generator=g).tolist()
        img = img[:, y:y + 224, x:x + 224]
        if torch.rand(1, generator=g).item() < 0.5:
            img = img.flip(2)
        out = img.float().div_(255.0)
        for _ in range(self.blur):
            out = F.avg_pool2d(out.unsqueeze(0), 3, stride=1, padding=1).squeeze(0)
        out = (out - self.MEAN) / self.STD
        label = int(torch.randint(0, 1000, (1,), generator=g).item())
        return out.contiguous(), label


# ------------------------------------------------------- GPT-2-small-like


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, 4 * d)
        self.fc2 = nn.Linear(4 * d, d)

    def attention(self, x):
        b, s, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=2)
        q, k, v = (t.view(b, s, self.heads, d // self.heads).transpose(1, 2) for t in (q, k, v))
        if hasattr(F, "scaled_dot_product_attention"):
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:  # torch < 2.0
            att = (q @ k.transpose(-2, -1)) / math.sqrt(q.size(-1))
            mask = torch.ones(s, s, dtype=torch.bool, device=x.device).triu(1)
            y = att.masked_fill(mask, float("-inf")).softmax(-1) @ v
        return self.proj(y.transpose(1, 2).reshape(b, s, d))

    def forward(self, x):
        x = x + self.attention(self.ln1(x))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class GPT(nn.Module):
    """GPT-2 small: 12 layers, 768 wide, 12 heads, 50257 tokens, tied head."""

    def __init__(self, vocab=50257, d=768, layers=12, heads=12, max_seq=1024):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(max_seq, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        self.head.weight = self.tok.weight

    def forward(self, idx):
        pos = torch.arange(idx.size(1), device=idx.device)
        x = self.tok(idx) + self.pos(pos)
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.ln(x))


class SyntheticTokens(Dataset):
    def __init__(self, seq, vocab=50257, length=1 << 20):
        self.seq, self.vocab, self.length = seq, vocab, length

    def __len__(self):
        return self.length

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        t = torch.randint(0, self.vocab, (self.seq + 1,), generator=g)
        return t[:-1], t[1:]


# ------------------------------------------------------------ DLRM-like


class DLRM(nn.Module):
    """Bottom MLP on dense features, pooled embedding tables, pairwise dot
    interaction, top MLP (the DLRM paper's layout, smaller tables)."""

    def __init__(self, dense=13, tables=8, rows=200000, dim=64):
        super().__init__()
        self.bottom = nn.Sequential(nn.Linear(dense, 512), nn.ReLU(), nn.Linear(512, 256),
                                    nn.ReLU(), nn.Linear(256, dim), nn.ReLU())
        self.emb = nn.ModuleList(nn.EmbeddingBag(rows, dim, mode="sum") for _ in range(tables))
        n = tables + 1
        self.register_buffer("tri", torch.tril_indices(n, n, offset=-1), persistent=False)
        self.top = nn.Sequential(nn.Linear(dim + n * (n - 1) // 2, 512), nn.ReLU(),
                                 nn.Linear(512, 256), nn.ReLU(), nn.Linear(256, 1))

    def forward(self, dense, sparse):
        x = self.bottom(dense)
        feats = [x] + [e(sparse[:, i, :]) for i, e in enumerate(self.emb)]
        z = torch.stack(feats, dim=1)
        inter = torch.bmm(z, z.transpose(1, 2))[:, self.tri[0], self.tri[1]]
        return self.top(torch.cat([x, inter], dim=1)).squeeze(1)


class SyntheticClicks(Dataset):
    def __init__(self, dense=13, tables=8, rows=200000, pooling=4, length=1 << 22):
        self.dense, self.tables, self.rows, self.pooling = dense, tables, rows, pooling
        self.length = length

    def __len__(self):
        return self.length

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        d = torch.randn(self.dense, generator=g).abs_().log1p_()
        s = torch.randint(0, self.rows, (self.tables, self.pooling), generator=g)
        return (d, s), torch.randint(0, 2, (1,), generator=g).float().squeeze(0)


# ------------------------------------------------------------ the table


def build(cfg, device):
    """Returns (model, static_batch, dataset, loss_fn, info) for one config.

    static_batch is (inputs tuple, target) already on `device`, used when the
    config has no DataLoader; dataset makes the same shapes on the CPU.
    """
    w, b = cfg["workload"], int(cfg["batch"])
    gen = torch.Generator(device="cpu").manual_seed(0)
    info = {}
    if w == "resnet50":
        model, info["model_source"] = resnet50_model()
        x = torch.randn(b, 3, 224, 224, generator=gen)
        y = torch.randint(0, 1000, (b,), generator=gen)
        batch = ((x,), y)
        dataset = SyntheticImages(blur=int(cfg.get("blur", 2)))
        loss_fn = nn.CrossEntropyLoss()
    elif w == "gpt2":
        seq = int(cfg["seq"])
        model = GPT(max_seq=max(1024, seq))
        t = torch.randint(0, 50257, (b, seq + 1), generator=gen)
        batch = ((t[:, :-1].contiguous(),), t[:, 1:].contiguous())
        dataset = SyntheticTokens(seq)

        def loss_fn(out, tgt):
            return F.cross_entropy(out.reshape(-1, out.size(-1)).float(), tgt.reshape(-1))
    elif w == "dlrm":
        model = DLRM()
        d = torch.randn(b, 13, generator=gen).abs_().log1p_()
        s = torch.randint(0, 200000, (b, 8, 4), generator=gen)
        batch = ((d, s), torch.randint(0, 2, (b,), generator=gen).float())
        dataset = SyntheticClicks()
        bce = nn.BCEWithLogitsLoss()

        def loss_fn(out, tgt):
            return bce(out.float(), tgt)
    else:
        raise ValueError("unknown workload %r" % w)
    inputs, target = batch
    batch = (tuple(t.to(device) for t in inputs), target.to(device))
    info["parameters"] = sum(p.numel() for p in model.parameters())
    return model.to(device), batch, dataset, loss_fn, info
